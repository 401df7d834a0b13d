//! Heat maps as files: a PNG (chunks written here, the pixels deflated by miniz_oxide) and
//! an SVG that shows the same picture with the CTA tile grid, the axes and a title.
//! White is right, red the largest finite error, purple a NaN or an Inf.

use crate::heat::Heat;

/// The picture's longer side, in pixels, at most (a cell is a whole number of pixels).
const TARGET_PIXELS: usize = 512;

/// Pixels per cell.
fn scale(h: &Heat) -> usize {
    (TARGET_PIXELS / h.rows.max(h.cols).max(1)).max(1)
}

fn color(v: f64, peak: f64) -> [u8; 3] {
    if !v.is_finite() {
        return [128, 0, 128];
    }
    if v <= 0.0 || peak <= 0.0 {
        return [255, 255, 255];
    }
    // sqrt, so small errors next to a large one still show.
    let t = (v / peak).clamp(0.0, 1.0).sqrt();
    let fade = (255.0 * (1.0 - t) * 0.85) as u8;
    [255, fade, fade]
}

/// Whether output row `r` starts a CTA tile (and is not the first row).
fn tile_edge(at: usize, tile: usize) -> bool {
    at != 0 && tile > 0 && at % tile == 0
}

/// RGB pixels, row-major, with the tile grid drawn in grey.
fn pixels(h: &Heat) -> (usize, usize, Vec<u8>) {
    let s = scale(h);
    let (w, ht) = (h.cols * s, h.rows * s);
    let peak = h.peak();
    let mut px = vec![0u8; w * ht * 3];
    for y in 0..ht {
        for x in 0..w {
            let (r, c) = (y / s, x / s);
            let mut rgb = color(h.values[r * h.cols + c], peak);
            // Output row/column of this pixel's first sample: a tile boundary there?
            let (out_r, out_c) = (r * h.cell.0, c * h.cell.1);
            let first_row_of_cell = y % s == 0;
            let first_col_of_cell = x % s == 0;
            let on_row_edge = first_row_of_cell
                && (out_r.saturating_sub(h.cell.0) + 1..=out_r).any(|o| tile_edge(o, h.tile.0));
            let on_col_edge = first_col_of_cell
                && (out_c.saturating_sub(h.cell.1) + 1..=out_c).any(|o| tile_edge(o, h.tile.1));
            if (on_row_edge || on_col_edge) && r + c > 0 {
                rgb = [160, 160, 160];
            }
            let at = (y * w + x) * 3;
            px[at..at + 3].copy_from_slice(&rgb);
        }
    }
    (w, ht, px)
}

/// The heat map as a PNG file's bytes.
pub fn heat_png(h: &Heat) -> Vec<u8> {
    let (w, ht, px) = pixels(h);
    let mut raw = Vec::with_capacity((w * 3 + 1) * ht);
    for y in 0..ht {
        raw.push(0); // filter: none
        raw.extend_from_slice(&px[y * w * 3..(y + 1) * w * 3]);
    }
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(ht as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no filter, no interlace
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(
        &mut png,
        b"IDAT",
        &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6),
    );
    chunk(&mut png, b"IEND", &[]);
    png
}

/// The heat map as an SVG: the PNG embedded, the tile grid as lines, a title.
pub fn heat_svg(h: &Heat, title: &str) -> String {
    let png = heat_png(h);
    let s = scale(h);
    let (w, ht) = (h.cols * s, h.rows * s);
    let (top, left) = (40usize, 10usize);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        w + 2 * left,
        ht + top + 30
    );
    svg.push_str(&format!(
        "<text x=\"{left}\" y=\"16\">{}</text>\n<text x=\"{left}\" y=\"32\" fill=\"#555\">M = {} rows x N = {} columns; CTA tile {} x {}; red: |kernel - reference| up to {}; purple: NaN/Inf</text>\n",
        escape(title),
        h.m,
        h.n,
        h.tile.0,
        h.tile.1,
        h.peak()
    ));
    svg.push_str(&format!(
        "<image x=\"{left}\" y=\"{top}\" width=\"{w}\" height=\"{ht}\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{}\"/>\n",
        base64(&png)
    ));
    svg.push_str(&format!(
        "<rect x=\"{left}\" y=\"{top}\" width=\"{w}\" height=\"{ht}\" fill=\"none\" stroke=\"#333\"/>\n"
    ));
    svg.push_str(&format!(
        "<text x=\"{left}\" y=\"{}\" fill=\"#555\">n = 0 .. {} (left to right), m = 0 .. {} (top to bottom)</text>\n",
        top + ht + 18,
        h.n.saturating_sub(1),
        h.m.saturating_sub(1)
    ));
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

pub(crate) fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for group in data.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
