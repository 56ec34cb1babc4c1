//! The console's build steps after rustc (scripts/build-web.sh):
//! - `web-bindgen split IN.wasm OUT_DIR HASH`: splits the linked module (built with
//!   `--emit-relocs`) at its `wasm_split` functions into the main module `OUT_DIR/main.wasm`, one
//!   module per lazily loaded part (`OUT_DIR/<part>-HASH.wasm`) and their loader
//!   (`OUT_DIR/__wasm_split-HASH.js`, which fetches the parts next to itself and imports
//!   `./web-HASH.js`, the name the build gives wasm-bindgen's output).
//! - `web-bindgen IN.wasm OUT_DIR`: what `wasm-bindgen --target web --no-typescript --out-name
//!   web --keep-lld-exports --no-demangle --out-dir OUT_DIR IN.wasm` does, built from
//!   wasm-bindgen's library alone so a fresh machine compiles a third of what the CLI package
//!   needs. The lld exports stay: the lazily loaded parts link against them.
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let done = match args.as_slice() {
        [split, input, out_dir, hash] if split == "split" => split_module(input, out_dir, hash),
        [input, out_dir] => bindgen(input, out_dir),
        _ => Err(
            "usage: web-bindgen IN.wasm OUT_DIR | web-bindgen split IN.wasm OUT_DIR HASH".into(),
        ),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("web-bindgen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bindgen(input: &str, out_dir: &str) -> Result<(), String> {
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen
        .web(true)
        .and_then(|b| {
            b.input_path(input)
                .out_name("web")
                .typescript(false)
                .keep_lld_exports(true)
                .demangle(false)
                // The CLI's default (its flag is off): the JS names the .wasm next to it.
                .omit_default_module_path(false)
                .generate(out_dir)
        })
        .map_err(|e| format!("{e:#}"))
}

fn split_module(input: &str, out_dir: &str, hash: &str) -> Result<(), String> {
    if hash.len() != 12 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("{hash:?} is not a 12-digit hexadecimal hash"));
    }
    let wasm = std::fs::read(input).map_err(|e| format!("reading {input}: {e}"))?;
    let out = Path::new(out_dir);
    std::fs::create_dir_all(out).map_err(|e| format!("creating {out_dir}: {e}"))?;
    let main_out = out.join("main.wasm");
    let loader = format!("__wasm_split-{hash}.js");
    let link_name = format!("./{loader}");
    let main_module = format!("./web-{hash}.js");
    let mut options = wasm_split_cli_support::Options::new(&wasm);
    options.output_dir = out;
    options.main_out_path = &main_out;
    options.link_name = &link_name;
    options.main_module = &main_module;
    let split = wasm_split_cli_support::transform(options).map_err(|e| format!("{e:#}"))?;
    // Each part under a hashed name (cached for a year, like the rest), and the loader told so.
    let loader_path = out.join(&loader);
    let mut js = std::fs::read_to_string(&loader_path)
        .map_err(|e| format!("reading {}: {e}", loader_path.display()))?;
    for part in &split.split_modules {
        let stem = part
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| format!("a part without a name: {}", part.display()))?;
        let named = format!("{stem}-{hash}.wasm");
        std::fs::rename(part, out.join(&named))
            .map_err(|e| format!("renaming {}: {e}", part.display()))?;
        let old = format!("\"./{stem}.wasm\"");
        if !js.contains(&old) {
            return Err(format!("the loader does not name {old}"));
        }
        js = js.replace(&old, &format!("\"./{named}\""));
        println!("lazily loaded part: {named}");
    }
    std::fs::write(&loader_path, js).map_err(|e| format!("writing {}: {e}", loader_path.display()))
}
