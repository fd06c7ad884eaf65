//! The generated module of a `.cu` file that includes `warp_launch.h`:
//! its images and text paired once as a `warp_launch::EmbeddedCudaModule`,
//! and per kernel a launcher over warp-launch's `Kernel` whose arguments
//! are warp-launch's types. A proven kernel's launches are safe (the
//! access rules read from the text are checked on every launch); an
//! unproven one has only `unsafe` launches, whose docs say why.

use heck::ToSnakeCase;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::names::ident;
use super::record::{CudaFile, CudaKernel};
use super::wl_kernels::{WlKernel, WlParam};

/// The module of `f` (a `warp_launch.h` file whose text was copied to
/// `source` in the output directory `out_dir`).
pub(crate) fn module(f: &CudaFile, source: &str, out_dir: &std::path::Path) -> TokenStream {
    let m = ident(&f.module);
    let name = &f.name;
    let images = f.images.iter().map(|i| {
        let path = out_dir.join(i).display().to_string();
        quote! { (#i, include_bytes!(#path)) }
    });
    let source_path = out_dir.join(source).display().to_string();
    let warning = match &f.warning {
        Some((line, text)) => quote! { ::core::option::Option::Some((#line, #text)) },
        None => quote! { ::core::option::Option::None },
    };
    let ptx_doc = match &f.no_ptx {
        None => {
            "a cubin per architecture asked for and PTX (ISA 8.0, from NVRTC 12.0) for the rest"
                .to_string()
        }
        Some(why) => format!("a cubin per architecture asked for, and no PTX ({why})"),
    };
    let doc = format!(
        " `{name}`, written against `warp_launch.h` and compiled by warp_build::CudaBuild from the text warp-launch's reader re-emits, with that header and no other option: {ptx_doc}. Its kernels are declared from the same text when the module's `load` runs; proven ones have safe launchers."
    );
    let kernels = f
        .kernels
        .iter()
        .filter_map(|k| k.warp_launch.as_ref().map(|w| kernel(k, w)));
    quote! {
        #[doc = #doc]
        pub mod #m {
            /// The images of this file; [`load`] picks the one a device runs.
            pub static IMAGES: ::warp_launch::ImageSet = ::warp_launch::ImageSet::new(#name, &[#(#images),*]);

            /// The file's text paired with its images and NVRTC's first
            /// warning at build time, as warp_build::CudaBuild compiled them.
            #[allow(
                clippy::undocumented_unsafe_blocks,
                reason = "warp_build::CudaBuild compiled every image of IMAGES from the reader's re-emission of exactly this text, with warp_launch.h and no other option, and recorded NVRTC's first warning"
            )]
            pub static MODULE: ::warp_launch::EmbeddedCudaModule = unsafe {
                ::warp_launch::EmbeddedCudaModule::new(#name, include_str!(#source_path), &IMAGES, #warning)
            };

            /// Loads the image `device` runs (exact cubin, same major lower
            /// minor, else PTX the driver compiles) with every kernel
            /// declared from the text; `CudaModule::image` names the image.
            ///
            /// # Errors
            ///
            /// As `warp_launch::CudaModule::from_embedded`.
            pub fn load(device: impl ::warp_launch::IntoDevice) -> ::warp_launch::Result<::warp_launch::CudaModule> {
                ::warp_launch::CudaModule::from_embedded(&MODULE, device)
            }
            #(#kernels)*
        }
    }
}

/// The argument type, the `TypedArg` and the `ParamKind` of a parameter,
/// and the const generic it needs (an array of unknown dimensions).
fn param_tokens(
    p: &WlParam,
    i: usize,
) -> (TokenStream, TokenStream, TokenStream, Option<syn::Ident>) {
    let id = ident(&p.name.to_snake_case());
    let elem: syn::Type = syn::parse_str(&p.rust).unwrap_or_else(|_| syn::parse_quote!(()));
    let dtype = format_ident!("{}", p.dtype.to_uppercase());
    match p.array {
        Some(ndim) => {
            let (n, generic, ndim_tokens) = match ndim {
                Some(d) => {
                    let n = usize::from(d);
                    (quote!(#n), None, quote!(::core::option::Option::Some(#d)))
                }
                None => {
                    let g = format_ident!("N{i}");
                    (quote!(#g), Some(g), quote!(::core::option::Option::None))
                }
            };
            (
                quote!(#id: &::warp_launch::TypedArray<#elem, #n>),
                quote!(::warp_launch::TypedArg::Array(#id.as_array())),
                quote!(::warp_launch::ParamKind::Array { dtype: ::warp_launch::DType::#dtype, ndim: #ndim_tokens }),
                generic,
            )
        }
        None => (
            quote!(#id: #elem),
            quote!(::warp_launch::TypedArg::value(&#id)),
            quote!(::warp_launch::ParamKind::Value(::warp_launch::DType::#dtype)),
            None,
        ),
    }
}

fn kernel(k: &CudaKernel, w: &WlKernel) -> TokenStream {
    let ty = ident(&k.type_name);
    let name = &k.expression;
    let parts: Vec<_> = w
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| param_tokens(p, i))
        .collect();
    let args: Vec<&TokenStream> = parts.iter().map(|p| &p.0).collect();
    let typed: Vec<&TokenStream> = parts.iter().map(|p| &p.1).collect();
    let kinds = w.params.iter().zip(&parts).map(|(p, part)| {
        let n = &p.name;
        let kind = &part.2;
        quote!((#n, #kind))
    });
    let generics: Vec<&syn::Ident> = parts.iter().filter_map(|p| p.3.as_ref()).collect();
    let generics = (!generics.is_empty()).then(|| quote!(<#(const #generics: usize),*>));
    let c_sig = std::iter::once(format!("wl::launch_bounds_t<{}> dim", w.dim))
        .chain(w.params.iter().map(|p| format!("{} {}", p.c_type, p.name)))
        .collect::<Vec<_>>()
        .join(", ");
    let verdict = match &w.unproven {
        None => "Its accesses are proven from the text: every launch checks its access rules against the launch's `dim` and the arrays' extents, and refuses one that would reach past an array (`Error::OutOfBounds`) before the driver sees it.".to_string(),
        Some(why) => format!(
            "Its accesses are not proven, so it has only the `unsafe` `launch_unchecked` and `launch_unchecked_on`: {why}."
        ),
    };
    let doc =
        format!(" The `warp_launch.h` kernel `{name}({c_sig})`, with typed launches. {verdict}");
    let launches = if w.unproven.is_none() {
        quote! {
            /// Launches over `dim` on the current stream of the arrays'
            /// device, after every check of `Kernel::launch_args` (the
            /// access rules against `dim` included).
            ///
            /// # Errors
            ///
            /// As `warp_launch::Kernel::launch_args`: `Error::OutOfBounds`
            /// for a `dim` an array is too small for, arrays on another
            /// device, the driver's errors.
            #[allow(clippy::too_many_arguments)]
            pub fn launch #generics (&self, dim: impl ::core::convert::Into<::warp_launch::Dim>, #(#args),*) -> ::warp_launch::Result<()> {
                self.0.launch_args(::warp_launch::Pass::Forward, dim, ::core::option::Option::None, &[#(#typed),*])
            }

            /// As `launch`, on `stream` (of the arrays' device).
            ///
            /// # Errors
            ///
            /// As `launch`; a stream of another context.
            #[allow(clippy::too_many_arguments)]
            pub fn launch_on #generics (&self, stream: &::warp_launch::Stream, dim: impl ::core::convert::Into<::warp_launch::Dim>, #(#args),*) -> ::warp_launch::Result<()> {
                self.0.launch_args(::warp_launch::Pass::Forward, dim, ::core::option::Option::Some(stream), &[#(#typed),*])
            }
        }
    } else {
        quote! {
            /// Launches over `dim` without the access rules (none could be
            /// proven); every other check of `Kernel::launch_args` runs.
            ///
            /// # Safety
            ///
            /// As `warp_launch::Kernel::launch_args_unchecked`: the kernel,
            /// run over `dim` with these arguments, reads and writes only
            /// elements inside the arrays it is given.
            ///
            /// # Errors
            ///
            /// As `warp_launch::Kernel::launch_args`, less the access rules.
            #[allow(
                clippy::too_many_arguments,
                clippy::undocumented_unsafe_blocks,
                reason = "the unsafe block passes on the caller's promise (# Safety)"
            )]
            pub unsafe fn launch_unchecked #generics (&self, dim: impl ::core::convert::Into<::warp_launch::Dim>, #(#args),*) -> ::warp_launch::Result<()> {
                unsafe { self.0.launch_args_unchecked(::warp_launch::Pass::Forward, dim, ::core::option::Option::None, &[#(#typed),*]) }
            }

            /// As `launch_unchecked`, on `stream` (of the arrays' device).
            ///
            /// # Safety
            ///
            /// As `launch_unchecked`.
            ///
            /// # Errors
            ///
            /// As `launch_unchecked`; a stream of another context.
            #[allow(
                clippy::too_many_arguments,
                clippy::undocumented_unsafe_blocks,
                reason = "the unsafe block passes on the caller's promise (# Safety)"
            )]
            pub unsafe fn launch_unchecked_on #generics (&self, stream: &::warp_launch::Stream, dim: impl ::core::convert::Into<::warp_launch::Dim>, #(#args),*) -> ::warp_launch::Result<()> {
                unsafe { self.0.launch_args_unchecked(::warp_launch::Pass::Forward, dim, ::core::option::Option::Some(stream), &[#(#typed),*]) }
            }
        }
    };
    let proven = w.unproven.is_none();
    quote! {
        #[doc = #doc]
        #[derive(Clone)]
        pub struct #ty(::warp_launch::Kernel);

        impl #ty {
            /// The kernel's name in the module.
            pub const NAME: &'static str = #name;
            /// Whether the build read its accesses as proven (safe launches).
            pub const PROVEN: bool = #proven;

            /// Takes the kernel from `module` (loaded by `load`) and checks
            /// that its declared parameters are this launcher's.
            ///
            /// # Errors
            ///
            /// `Error::NoSuchKernel`, or `Error::Signature` naming the
            /// first parameter that differs.
            pub fn new(module: &::warp_launch::CudaModule) -> ::warp_launch::Result<Self> {
                let kernel = module.kernel(Self::NAME)?;
                kernel.check_signature(&[#(#kinds),*])?;
                ::core::result::Result::Ok(Self(kernel))
            }

            /// The kernel, for what the typed launches do not cover.
            pub fn kernel(&self) -> &::warp_launch::Kernel {
                &self.0
            }

            #launches
        }
    }
}
