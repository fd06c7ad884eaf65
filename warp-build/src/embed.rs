//! The Rust file that embeds a compiled module: one `warp_launch::EmbeddedModule`
//! static whose source, metadata and images are `include_str!` / `include_bytes!`
//! of the files in the output directory.

use std::path::Path;

use heck::ToShoutySnakeCase;
use quote::quote;

use crate::cpu_parse::CpuKernel;
use crate::cpu_shim::symbol;
use crate::error::BuildError;

/// The name of the static for `module` (`kernels` -> `KERNELS`).
pub(crate) fn static_name(module: &str) -> String {
    module.to_shouty_snake_case()
}

/// The architecture of an image file name (`wp_m.sm90.cubin` -> 90).
fn arch_of(file: &str) -> u32 {
    file.rsplit('.')
        .nth(1)
        .and_then(|s| s.strip_prefix("sm"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The image files among `files`: cubins by architecture, then PTX by
/// architecture.
pub(crate) fn images(files: &[String]) -> Vec<&str> {
    let mut cubins: Vec<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|f| f.ends_with(".cubin"))
        .collect();
    let mut ptx: Vec<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|f| f.ends_with(".ptx"))
        .collect();
    cubins.sort_by_key(|f| arch_of(f));
    ptx.sort_by_key(|f| arch_of(f));
    cubins.extend(ptx);
    cubins
}

/// The comment above the static holding the CPU entry points (clippy's
/// `undocumented_unsafe_blocks` reads it; prettyplease drops comments, so it
/// is put back after formatting).
const CPU_SAFETY: &str = "// SAFETY: the functions are the wpl_ entry points warp-build generated for these\n\
     // kernels of this module (linked from its static library), and wpl_take_assert is\n\
     // warp-build's CPU runtime's.";

/// The comment above the module's static: the reason its `unsafe`
/// constructor's promise holds (put back after formatting, as
/// [`CPU_SAFETY`]).
const MODULE_SAFETY: &str = "// SAFETY: one compile produced them all: warp-build wrote this file right after one\n\
     // Warp compile of this module wrote the included source, metadata, images and facts\n\
     // (what Warp's objects said of native code, preambles and the CPU code) into this\n\
     // directory, derived the carried declarations (rules) from that source, and built\n\
     // the CPU code (if any) from the C++ that compile generated.";

fn ident(name: &str) -> syn::Ident {
    syn::Ident::new(name, proc_macro2::Span::call_site())
}

/// The `unsafe extern "C"` block and the `EmbeddedCpu` static of a module's
/// CPU code, and the expression for the module's `cpu` field.
fn cpu_items(
    module: &str,
    kernels: Option<&[CpuKernel]>,
) -> (proc_macro2::TokenStream, proc_macro2::TokenStream) {
    let Some(kernels) = kernels else {
        return (quote! {}, quote! { None });
    };
    let cpu_static = ident(&format!("{}_CPU", static_name(module)));
    let mut decls = Vec::new();
    let mut entries = Vec::new();
    let mut unsupported = Vec::new();
    for k in kernels {
        let key = k.key.as_str();
        if let Some(why) = &k.unsupported {
            unsupported.push(quote! { (#key, #why) });
            continue;
        }
        let fwd = ident(&symbol(module, key, "forward"));
        let layout = ident(&symbol(module, key, "layout"));
        decls.push(quote! {
            fn #fwd(dim: *const ::core::ffi::c_void, args: *mut ::core::ffi::c_void, first: usize, last: usize);
            fn #layout(out: *mut usize, cap: usize) -> usize;
        });
        let bwd = if k.backward {
            let bwd = ident(&symbol(module, key, "backward"));
            decls.push(quote! {
                fn #bwd(
                    dim: *const ::core::ffi::c_void,
                    args: *mut ::core::ffi::c_void,
                    adj_args: *mut ::core::ffi::c_void,
                    first: usize,
                    last: usize,
                );
            });
            quote! { Some(#bwd) }
        } else {
            quote! { None }
        };
        entries.push(quote! {
            warp_launch::EmbeddedCpuKernel::new(#key, #fwd, #bwd, #layout)
        });
    }
    let doc = format!(" The CPU entry points of the Warp module `{module}`.");
    // The declarations are local to the static's initializer: two modules'
    // files included side by side (both declare wpl_take_assert) do not clash.
    let items = quote! {
        #[doc = #doc]
        static #cpu_static: warp_launch::EmbeddedCpu = {
            unsafe extern "C" {
                #(#decls)*
                fn wpl_take_assert() -> *const ::core::ffi::c_char;
            }
            unsafe {
                warp_launch::EmbeddedCpu::new(&[#(#entries),*], &[#(#unsupported),*], wpl_take_assert)
            }
        };
    };
    (items, quote! { Some(&#cpu_static) })
}

/// The text of `<module>.rs`: a header comment and the documented static
/// (with the module's CPU entry points when `cpu` is given).
pub(crate) fn generate(
    module: &str,
    dir: &Path,
    files: &[String],
    cpu: Option<&[CpuKernel]>,
    doc: &str,
) -> Result<String, BuildError> {
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let ident = ident(&static_name(module));
    let (cpu_items, cpu_field) = cpu_items(module, cpu);
    let cu = path(&format!("wp_{module}.cu"));
    let meta = path(&format!("wp_{module}.meta"));
    let facts_file = format!("wp_{module}.facts.json");
    let facts = files.contains(&facts_file).then(|| {
        let facts = path(&facts_file);
        quote! { .with_facts(include_str!(#facts)) }
    });
    let rules_file = crate::rules::file_name(module);
    let rules = files.contains(&rules_file).then(|| {
        let rules = path(&rules_file);
        quote! { .with_rules(include_str!(#rules)) }
    });
    let images = images(files).into_iter().map(|file| {
        let abs = path(file);
        quote! {
            warp_launch::EmbeddedImage {
                file: #file,
                bytes: include_bytes!(#abs),
            }
        }
    });
    let doc_lines = doc.lines().map(|l| {
        if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        }
    });
    let tokens = quote! {
        #cpu_items
        #(#[doc = #doc_lines])*
        pub static #ident: warp_launch::EmbeddedModule = unsafe {
            warp_launch::EmbeddedModule::new(
                #module,
                include_str!(#cu),
                include_str!(#meta),
                &[#(#images),*],
                #cpu_field,
            )
            #facts
            #rules
        };
    };
    let file: syn::File = syn::parse2(tokens).map_err(|e| BuildError::Codegen {
        module: module.to_string(),
        problem: e.to_string(),
    })?;
    let text = prettyplease::unparse(&file);
    // The safety comments: right above the CPU static's `unsafe {`, and
    // right above the module's static (after its doc lines).
    let cpu_static = format!("static {}_CPU:", static_name(module));
    let module_static = format!("pub static {}:", static_name(module));
    let mut in_static = false;
    let text: String = text
        .lines()
        .map(|l| {
            in_static |= cpu.is_some() && l.starts_with(&cpu_static);
            if in_static && l == "    unsafe {" {
                in_static = false;
                let comment: String = CPU_SAFETY.lines().map(|c| format!("    {c}\n")).collect();
                format!("{comment}{l}\n")
            } else if l.starts_with(&module_static) {
                format!("{MODULE_SAFETY}\n{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    Ok(format!(
        "// @generated by warp-build from Warp's output in {}; do not edit.\n\n{text}",
        dir.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_sort_by_architecture_not_by_name() {
        let files: Vec<String> = [
            "wp_k.cu",
            "wp_k.meta",
            "wp_k.sm90.cubin",
            "wp_k.sm100.cubin",
            "wp_k.sm75.ptx",
            "wp_k.sm75.cubin",
            "wp_k.sm120.cubin",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            images(&files),
            [
                "wp_k.sm75.cubin",
                "wp_k.sm90.cubin",
                "wp_k.sm100.cubin",
                "wp_k.sm120.cubin",
                "wp_k.sm75.ptx"
            ]
        );
    }

    #[test]
    fn static_names_are_shouty() {
        assert_eq!(static_name("kernels"), "KERNELS");
        assert_eq!(static_name("my_kernels2"), "MY_KERNELS2");
        assert_eq!(static_name("tapeKernels"), "TAPE_KERNELS");
    }

    #[test]
    fn generated_code_names_every_file() {
        let files: Vec<String> = ["wp_m.cu", "wp_m.meta", "wp_m.sm90.cubin", "wp_m.sm80.ptx"]
            .map(String::from)
            .to_vec();
        let text = generate(
            "m",
            Path::new("/out/warp/m"),
            &files,
            None,
            "Doc line.\n\nSecond.",
        )
        .unwrap();
        // The module is built by its unsafe constructor, the reason right
        // above the static (below its doc lines).
        assert!(
            text.contains(&format!(
                "/// Second.\n{MODULE_SAFETY}\npub static M: warp_launch::EmbeddedModule = unsafe {{\n    warp_launch::EmbeddedModule::new(\n"
            )),
            "{text}"
        );
        // No facts file, no facts: the caller of `new` vouches (a
        // directory of another tool's output).
        assert!(!text.contains("with_facts"), "{text}");
        assert!(!text.contains("with_rules"), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn generated_code_declares_the_cpu_entry_points() {
        let files: Vec<String> = [
            "wp_m.cu",
            "wp_m.meta",
            "wp_m.sm90.cubin",
            "wp_m.cpp",
            "wp_m.facts.json",
            "wp_m.rules.json",
        ]
        .map(String::from)
        .to_vec();
        let kernels = [
            CpuKernel {
                key: "saxpy".into(),
                dim: 1,
                backward: true,
                fields: vec!["a".into(), "x".into(), "y".into()],
                unsupported: None,
            },
            CpuKernel {
                key: "fill".into(),
                dim: 2,
                backward: false,
                fields: vec!["out".into()],
                unsupported: None,
            },
            CpuKernel {
                key: "row_sums".into(),
                dim: 1,
                backward: true,
                fields: vec!["a".into(), "out".into()],
                unsupported: Some("its forward code uses `wp::tile_load`".into()),
            },
        ];
        let text = generate(
            "m",
            Path::new("/out/warp/m"),
            &files,
            Some(&kernels),
            "Doc line.",
        )
        .unwrap();
        // The safety comment sits right above the unsafe block.
        let comment: String = CPU_SAFETY.lines().map(|c| format!("    {c}\n")).collect();
        assert!(
            text.contains(&format!("{comment}    unsafe {{\n")),
            "{text}"
        );
        assert!(!text.contains("wpl_m__row_sums__forward"));
        assert!(!text.contains("wpl_m__fill__backward"));
        assert!(
            text.contains(".with_facts(include_str!(\"/out/warp/m/wp_m.facts.json\"))"),
            "{text}"
        );
        // The declarations warp-build derived ride with the module.
        assert!(
            text.contains(".with_rules(include_str!(\"/out/warp/m/wp_m.rules.json\"))"),
            "{text}"
        );
        insta::assert_snapshot!(text);
    }
}
