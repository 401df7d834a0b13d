//! Writes the seeds of every target (`kwb_tests::fuzz_props::seeds`) to
//! `fuzz/seeds/<target>/`: `cargo run --example seeds` in `fuzz/`.

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    for (target, name, bytes) in kwb_tests::fuzz_props::seeds() {
        let folder = dir.join(target);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(folder.join(name), bytes)?;
    }
    Ok(())
}
