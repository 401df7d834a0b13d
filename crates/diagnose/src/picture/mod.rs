//! Heat maps as files: a PNG (chunks written here, the pixels deflated by miniz_oxide)
//! a person can paste into a bug report, with its title (the rung and the kernel),
//! the output's rows M down and columns N across labelled at the CTA tile grid, and a
//! colour scale of |kernel - reference| (logarithmic where the errors span three
//! decades or more); and an SVG that holds the same picture with the title as text.
//! White is right, red the largest finite error, purple a NaN or an Inf.

mod font;

use crate::heat::Heat;

/// The plot's longer side, in pixels, at most (a cell is a whole number of pixels).
const TARGET_PIXELS: usize = 512;

/// Pixels per cell.
fn scale(h: &Heat) -> usize {
    (TARGET_PIXELS / h.rows.max(h.cols).max(1)).max(1)
}

/// How errors map to colours: by the square root of their share of the peak, or by
/// their logarithm between the smallest error shown and the peak.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Sqrt { peak: f64 },
    Log { low: f64, peak: f64 },
}

impl Scale {
    fn of(h: &Heat) -> Scale {
        let peak = h.peak();
        let low = h
            .values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if peak > 0.0 && low.is_finite() && peak / low >= 1000.0 {
            Scale::Log {
                low: low.max(peak * 1e-6),
                peak,
            }
        } else {
            Scale::Sqrt { peak }
        }
    }

    /// Where `v` lies between the scale's ends, 0 to 1.
    fn share(self, v: f64) -> f64 {
        match self {
            Scale::Sqrt { peak } => (v / peak).clamp(0.0, 1.0).sqrt(),
            Scale::Log { low, peak } => {
                ((v.max(low).ln() - low.ln()) / (peak.ln() - low.ln())).clamp(0.0, 1.0)
            }
        }
    }

    /// The error at share `t` of the scale.
    fn value_at(self, t: f64) -> f64 {
        match self {
            Scale::Sqrt { peak } => peak * t * t,
            Scale::Log { low, peak } => low * (peak / low).powf(t),
        }
    }

    fn color(self, v: f64) -> [u8; 3] {
        if !v.is_finite() {
            return [128, 0, 128];
        }
        let peak = match self {
            Scale::Sqrt { peak } | Scale::Log { peak, .. } => peak,
        };
        if v <= 0.0 || peak <= 0.0 {
            return [255, 255, 255];
        }
        let fade = (255.0 * (1.0 - self.share(v)) * 0.85) as u8;
        [255, fade, fade]
    }
}

/// A number as a label: plain where it is short, else in E notation.
fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".to_owned();
    }
    if (0.01..100_000.0).contains(&v.abs()) {
        let text = format!("{v:.3}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return text.to_owned();
    }
    format!("{v:.1e}").to_ascii_uppercase()
}

/// Whether output row `r` starts a CTA tile (and is not the first row).
fn tile_edge(at: usize, tile: usize) -> bool {
    at != 0 && tile > 0 && at % tile == 0
}

/// RGB pixels on a white ground.
struct Canvas {
    width: usize,
    height: usize,
    px: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            px: vec![255; width * height * 3],
        }
    }

    fn set(&mut self, x: usize, y: usize, rgb: [u8; 3]) {
        if x < self.width && y < self.height {
            let at = (y * self.width + x) * 3;
            self.px[at..at + 3].copy_from_slice(&rgb);
        }
    }

    fn rect(&mut self, x: usize, y: usize, w: usize, h: usize, rgb: [u8; 3]) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, rgb);
            }
        }
    }

    fn text(&mut self, x: usize, y: usize, text: &str, scale: usize, rgb: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let gx = x + i * font::ADVANCE * scale;
            for (row, line) in font::glyph(c).iter().enumerate() {
                for (col, ink) in line.bytes().take(font::WIDTH).enumerate() {
                    if ink == b'#' {
                        self.rect(gx + col * scale, y + row * scale, scale, scale, rgb);
                    }
                }
            }
        }
    }
}

const INK: [u8; 3] = [40, 40, 40];
const GREY: [u8; 3] = [110, 110, 110];
const GRID: [u8; 3] = [160, 160, 160];

/// The first output index of each CTA tile along a dimension of `extent`, with the
/// pixel it starts at; labels that would overlap the previous one are dropped.
fn ticks(
    extent: usize,
    tile: usize,
    cell: usize,
    s: usize,
    room: impl Fn(&str) -> usize,
) -> Vec<(usize, String)> {
    let tile = tile.max(1);
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut next_free = 0usize;
    let mut at = 0;
    while at < extent {
        let px = at / cell.max(1) * s;
        let label = at.to_string();
        if out.is_empty() || px >= next_free {
            next_free = px + room(&label);
            out.push((px, label));
        }
        at += tile;
    }
    out
}

/// Where the plot lies on the picture: (left, top).
pub(crate) fn plot_origin(h: &Heat) -> (usize, usize) {
    let widest = h.m.saturating_sub(1).to_string().len().max(1);
    (8 + font::ADVANCE + 6 + widest * font::ADVANCE + 6, 40)
}

/// The annotated picture's pixels.
fn picture(h: &Heat, title: &str) -> Canvas {
    let s = scale(h);
    let (pw, ph) = (h.cols * s, h.rows * s);
    let (left, top) = plot_origin(h);
    let scale_of = Scale::of(h);
    let peak = h.peak();
    let labels = [
        number(scale_of.value_at(1.0)),
        number(scale_of.value_at(0.5)),
        number(scale_of.value_at(0.0)),
    ];
    let label_chars = labels.iter().map(|l| l.len()).max().unwrap_or(1);
    let bar_x = left + pw + 12;
    let width = (bar_x + 12 + 6 + label_chars * font::ADVANCE + 8).max(left + 200);
    let height = top + ph + 24;
    let mut c = Canvas::new(width, height);
    // Title: at twice the size where it fits, else at the font's own, cut to fit.
    let fits = |scale: usize| (width.saturating_sub(8)) / (font::ADVANCE * scale);
    let (title_scale, room) = if title.chars().count() <= fits(2) {
        (2, fits(2))
    } else {
        (1, fits(1))
    };
    let mut shown: String = title.chars().take(room).collect();
    if title.chars().count() > room && room > 3 {
        shown = title.chars().take(room - 3).collect::<String>() + "...";
    }
    c.text(4, 4, &shown, title_scale, INK);
    // The cells, the tile grid, the frame.
    for y in 0..ph {
        for x in 0..pw {
            let (r, col) = (y / s, x / s);
            let mut rgb = scale_of.color(h.values[r * h.cols + col]);
            let (out_r, out_c) = (r * h.cell.0, col * h.cell.1);
            let on_row_edge = y % s == 0
                && (out_r.saturating_sub(h.cell.0) + 1..=out_r).any(|o| tile_edge(o, h.tile.0));
            let on_col_edge = x % s == 0
                && (out_c.saturating_sub(h.cell.1) + 1..=out_c).any(|o| tile_edge(o, h.tile.1));
            if (on_row_edge || on_col_edge) && r + col > 0 {
                rgb = GRID;
            }
            c.set(left + x, top + y, rgb);
        }
    }
    for x in left.saturating_sub(1)..=left + pw {
        c.set(x, top - 1, GREY);
        c.set(x, top + ph, GREY);
    }
    for y in top.saturating_sub(1)..=top + ph {
        c.set(left - 1, y, GREY);
        c.set(left + pw, y, GREY);
    }
    // N across the top, M down the left, labelled where each CTA tile starts.
    let n_row = top - 4 - font::HEIGHT;
    c.text(4, n_row, "N", 1, INK);
    for (px, label) in ticks(h.n, h.tile.1, h.cell.1, s, |l| font::width(l, 1) + 6) {
        c.text(left + px, n_row, &label, 1, GREY);
        c.rect(left + px, top - 3, 1, 2, GREY);
    }
    c.text(4, top + ph / 2, "M", 1, INK);
    for (py, label) in ticks(h.m, h.tile.0, h.cell.0, s, |_| font::HEIGHT + 3) {
        let w = font::width(&label, 1);
        c.text(left - 4 - w, top + py, &label, 1, GREY);
        c.rect(left - 3, top + py, 2, 1, GREY);
    }
    // The colour scale, its ends and middle labelled.
    for y in 0..ph {
        let t = 1.0 - y as f64 / (ph.max(2) - 1) as f64;
        let v = scale_of.value_at(t);
        let rgb = if peak > 0.0 {
            scale_of.color(v.max(1e-300))
        } else {
            [255, 255, 255]
        };
        c.rect(bar_x, top + y, 12, 1, rgb);
    }
    for y in top.saturating_sub(1)..=top + ph {
        c.set(bar_x - 1, y, GREY);
        c.set(bar_x + 12, y, GREY);
    }
    let label_x = bar_x + 18;
    c.text(label_x, top, &labels[0], 1, INK);
    c.text(label_x, top + ph / 2 - font::HEIGHT / 2, &labels[1], 1, INK);
    c.text(
        label_x,
        (top + ph).saturating_sub(font::HEIGHT),
        &labels[2],
        1,
        INK,
    );
    // What the colours mean.
    let caption = match scale_of {
        Scale::Log { .. } => "|KERNEL - REFERENCE|, LOG SCALE",
        Scale::Sqrt { .. } => "|KERNEL - REFERENCE|",
    };
    let caption_y = top + ph + 8;
    c.text(left, caption_y, caption, 1, INK);
    if h.values.iter().any(|v| !v.is_finite()) {
        let x = left + font::width(caption, 1) + 12;
        c.rect(x, caption_y, 10, font::HEIGHT, [128, 0, 128]);
        c.text(x + 14, caption_y, "NAN/INF", 1, INK);
    }
    c
}

/// The heat map as a PNG file's bytes, `title` drawn on it.
pub fn heat_png(h: &Heat, title: &str) -> Vec<u8> {
    let c = picture(h, title);
    let (w, ht) = (c.width, c.height);
    let mut raw = Vec::with_capacity((w * 3 + 1) * ht);
    for y in 0..ht {
        raw.push(0); // filter: none
        raw.extend_from_slice(&c.px[y * w * 3..(y + 1) * w * 3]);
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

/// The heat map as an SVG: the annotated PNG embedded, its title and scale as text.
pub fn heat_svg(h: &Heat, title: &str) -> String {
    let png = heat_png(h, title);
    let c = picture(h, title);
    let scale_of = Scale::of(h);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<title>{}</title>\n",
        c.width,
        c.height + 20,
        escape(title),
    );
    svg.push_str(&format!(
        "<image x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{}\"/>\n",
        c.width,
        c.height,
        base64(&png)
    ));
    svg.push_str(&format!(
        "<text x=\"4\" y=\"{}\" fill=\"#555\">M = {} rows x N = {} columns; CTA tile {} x {}; |kernel - reference| up to {}{}; purple: NaN/Inf</text>\n",
        c.height + 14,
        h.m,
        h.n,
        h.tile.0,
        h.tile.1,
        h.peak(),
        if matches!(scale_of, Scale::Log { .. }) { " (log scale)" } else { "" },
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
