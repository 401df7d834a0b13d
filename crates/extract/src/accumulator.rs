//! The type a file's MMAs accumulate in, read off the instructions it names: CuTe MMA
//! atoms (`SM90_64x128x16_F16F16F16_SS`: the first type after the shape is D's),
//! inline PTX (`mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`, `wgmma.mma_async
//! ….m64n128k16.f16.f16.f16`: the first type is D's) and WMMA accumulator fragments
//! (`fragment<wmma::accumulator, 16, 16, 16, half>`). A runner widens its tolerance
//! for random inputs by it: a correct kernel that sums in f16 drifts by f16's ulp
//! times sqrt(K), not f32's.

/// `f16` when every MMA the file names accumulates in 16-bit floats, `f32` when one
/// accumulates in f32 (or is integer), None when it names none.
pub fn of(source: &str) -> Option<&'static str> {
    let mut found: Vec<&'static str> = Vec::new();
    let bytes = source.as_bytes();
    // CuTe atoms: SM<digits>_<M>x<N>x<K>_<TYPES>_...
    for word in source.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric())) {
        let mut parts = word.split('_');
        let (Some(arch), Some(shape), Some(types)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if !(arch.starts_with("SM") && arch[2..].chars().all(|c| c.is_ascii_digit()))
            || shape.split('x').count() != 3
        {
            continue;
        }
        if let Some(t) = first_type(&types.to_ascii_lowercase()) {
            found.push(t);
        }
    }
    // Inline PTX.
    for head in ["mma.sync.aligned.", "wgmma.mma_async.sync.aligned."] {
        let mut from = 0;
        while let Some(at) = source[from..].find(head).map(|i| i + from) {
            from = at + head.len();
            let end = source[from..]
                .find(|c: char| !(c == '.' || c == '_' || c.is_ascii_alphanumeric()))
                .map_or(source.len(), |i| i + from);
            let fields: Vec<&str> = source[from..end].split('.').collect();
            // After the shape and the layouts: D's type first.
            if let Some(t) = fields
                .iter()
                .skip(1)
                .find(|f| !matches!(**f, "row" | "col") && !f.is_empty())
                .and_then(|f| first_type(f))
            {
                found.push(t);
            }
        }
    }
    // WMMA accumulator fragments.
    let mut from = 0;
    while let Some(at) = source[from..].find("accumulator,").map(|i| i + from) {
        from = at + 1;
        let end = source[at..].find('>').map_or(source.len(), |i| i + at);
        let last = source[at..end].rsplit(',').next().unwrap_or("").trim();
        if bytes
            .get(at.wrapping_sub(1))
            .is_some_and(|b| *b == b':' || *b == b' ' || *b == b'<')
        {
            found.push(match last {
                "half" | "__half" => "f16",
                _ => "f32",
            });
        }
    }
    if found.is_empty() {
        None
    } else if found.iter().all(|t| *t == "f16") {
        Some("f16")
    } else {
        Some("f32")
    }
}

/// The accumulation type a type list starts with (`f16f16f16`, `f32bf16bf16f32`,
/// `s32s8s8s32`, `f16`).
fn first_type(types: &str) -> Option<&'static str> {
    for (prefix, t) in [
        ("f16", "f16"),
        ("f32", "f32"),
        ("s32", "f32"),
        ("f64", "f32"),
    ] {
        if types.starts_with(prefix) {
            return Some(t);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn the_destination_type_of_each_mma_decides() {
        assert_eq!(
            of("TiledMMA mma = make_tiled_mma(SM90_64x128x16_F16F16F16_SS<GMMA::Major::MN>{});"),
            Some("f16")
        );
        assert_eq!(of("MMA_Atom<SM80_16x8x16_F32F16F16F32_TN> a;"), Some("f32"));
        assert_eq!(
            of("asm(\"mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0}\");"),
            Some("f16")
        );
        assert_eq!(
            of("asm(\"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0}\");"),
            Some("f32")
        );
        assert_eq!(
            of("wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;"),
            Some("f16")
        );
        assert_eq!(
            of("wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;"),
            Some("f32")
        );
        // One f32 MMA among f16 ones: not all f16.
        assert_eq!(
            of("SM80_16x8x8_F16F16F16F16_TN x; SM80_16x8x8_F32F16F16F32_TN y;"),
            Some("f32")
        );
        assert_eq!(of("float acc = 0; acc += a * b;"), None);
    }
}
