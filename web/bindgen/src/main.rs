//! `web-bindgen IN.wasm OUT_DIR`: what `wasm-bindgen --target web --no-typescript --out-name web
//! --out-dir OUT_DIR IN.wasm` does (byte-identical output), built from wasm-bindgen's library
//! alone so a fresh machine compiles a third of what the CLI package needs.
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, out_dir] = args.as_slice() else {
        eprintln!("usage: web-bindgen IN.wasm OUT_DIR");
        return ExitCode::from(2);
    };
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    let generated = bindgen.web(true).and_then(|b| {
        b.input_path(input)
            .out_name("web")
            .typescript(false)
            // The CLI's default (its flag is off): the JS names the .wasm next to it.
            .omit_default_module_path(false)
            .generate(out_dir)
    });
    match generated {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("web-bindgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}
