//! The Rust the launchers are: `quote!` of the model, parsed by `syn` and
//! formatted by `prettyplease`. Every path is absolute (`::warp_launch`,
//! `::core`, `::std`), so the file works wherever it is `include!`d and
//! whatever the including module defines.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::model::{
    FieldTy, KernelModel, Model, Param, ParamTy, StructModel, ValueTy, describe_effect,
    dtype_const, prose,
};
use crate::signature::ParamKind;

/// `#[doc = ...]` attributes, one per line (a leading space as `///` has).
fn docs<S: AsRef<str>>(lines: &[S]) -> TokenStream {
    let attrs = lines.iter().map(|l| {
        let l = l.as_ref();
        let text = if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        };
        quote!(#[doc = #text])
    });
    quote!(#(#attrs)*)
}

fn parse_type(text: &str) -> TokenStream {
    // The texts are ours (`f32`, `[f32; 3]`, element types of the crate's
    // own list), always valid types.
    text.parse().unwrap_or_else(|_| quote!(()))
}

/// The dtype constant `::warp_launch::DType::FLOAT32`.
fn dtype(d: &'static crate::DType) -> TokenStream {
    let c = format_ident!("{}", dtype_const(d));
    quote!(::warp_launch::DType::#c)
}

/// The `ParamKind` expression a launcher checks the kernel's parameter
/// against.
fn kind_expr(kind: &ParamKind, ty: Option<&ParamTy>, model: &Model) -> TokenStream {
    match (kind, ty) {
        (ParamKind::Value(d), _) => {
            let d = dtype(d);
            quote!(::warp_launch::ParamKind::Value(#d))
        }
        (ParamKind::Array { dtype: d, .. }, Some(ParamTy::Array { ndim, .. })) => {
            let d = dtype(d);
            let ndim = match ndim {
                Some(n) => {
                    let n = Literal::u8_unsuffixed(*n);
                    quote!(::core::option::Option::Some(#n))
                }
                None => quote!(::core::option::Option::None),
            };
            quote!(::warp_launch::ParamKind::Array { dtype: #d, ndim: #ndim })
        }
        (ParamKind::Array { dtype: d, ndim }, _) => {
            let d = dtype(d);
            let ndim = match ndim {
                Some(n) => {
                    let n = Literal::u8_unsuffixed(*n);
                    quote!(::core::option::Option::Some(#n))
                }
                None => quote!(::core::option::Option::None),
            };
            quote!(::warp_launch::ParamKind::Array { dtype: #d, ndim: #ndim })
        }
        (ParamKind::Struct(st), _) => {
            let ident = model
                .structs
                .iter()
                .find(|s| s.ty.name == st.name)
                .map(|s| s.ident.clone());
            match ident {
                Some(i) => {
                    quote!(::warp_launch::ParamKind::Struct(::std::sync::Arc::new(#i::warp_type())))
                }
                None => quote!(()),
            }
        }
    }
}

/// The Rust type of a parameter, as the launcher takes it.
fn param_type(p: &Param, model: &Model) -> TokenStream {
    match &p.ty {
        ParamTy::Value(_, v) => parse_type(&v.text()),
        ParamTy::Array {
            element,
            ndim,
            generic,
            ..
        } => {
            let e = parse_type(element);
            match ndim {
                Some(n) => {
                    let n = Literal::usize_unsuffixed(usize::from(*n));
                    quote!(&::warp_launch::TypedArray<#e, #n>)
                }
                None => quote!(&::warp_launch::TypedArray<#e, #generic>),
            }
        }
        ParamTy::Struct(i) => {
            let s = &model.structs[*i].ident;
            quote!(&#s)
        }
    }
}

/// The statement turning a by-value argument `name` into what the
/// `TypedArg` borrows (its bytes, or a checked `StructValue` of a struct
/// holding arrays), if any.
fn prepare(p: &Param, name: &proc_macro2::Ident, model: &Model) -> TokenStream {
    match &p.ty {
        ParamTy::Value(_, v) => prepare_value(*v, name),
        ParamTy::Struct(i) if model.structs[*i].holds_arrays => {
            quote!(let #name = #name.to_value()?;)
        }
        ParamTy::Struct(_) => quote!(),
        ParamTy::Array { .. } => quote!(),
    }
}

/// The statement turning the value `name` into its little-endian bytes
/// (an array of them, or of arrays of them).
fn prepare_value(v: ValueTy, name: &proc_macro2::Ident) -> TokenStream {
    match v {
        ValueTy::Scalar("bool") => quote!(let #name = [u8::from(#name)];),
        ValueTy::Scalar(_) => quote!(let #name = #name.to_le_bytes();),
        ValueTy::Vector(s, _) => {
            let enc = encoder(s);
            quote!(let #name = #name.map(#enc);)
        }
        ValueTy::Matrix(s, ..) => {
            let enc = encoder(s);
            quote!(let #name = #name.map(|row| row.map(#enc));)
        }
    }
}

/// The bytes of a value [`prepare_value`] prepared, as `&[u8]`.
fn value_bytes(v: ValueTy, name: &proc_macro2::Ident) -> TokenStream {
    match v {
        ValueTy::Scalar(_) => quote!(&#name[..]),
        ValueTy::Vector(..) => quote!(#name.as_flattened()),
        ValueTy::Matrix(..) => quote!(#name.as_flattened().as_flattened()),
    }
}

/// A function from one scalar to its little-endian bytes.
fn encoder(scalar: &str) -> TokenStream {
    if scalar == "bool" {
        quote!(|b: bool| [u8::from(b)])
    } else {
        let s = parse_type(scalar);
        quote!(#s::to_le_bytes)
    }
}

/// The `TypedArg` of a prepared argument.
fn typed_arg(p: &Param, name: &proc_macro2::Ident, model: &Model) -> TokenStream {
    match &p.ty {
        ParamTy::Struct(i) if model.structs[*i].holds_arrays => {
            quote!(::warp_launch::TypedArg::Struct(::warp_launch::StructRef::from(&#name)))
        }
        ParamTy::Value(_, ValueTy::Scalar(_)) => quote!(::warp_launch::TypedArg::Value(&#name)),
        ParamTy::Value(_, ValueTy::Vector(..)) => {
            quote!(::warp_launch::TypedArg::Value(#name.as_flattened()))
        }
        ParamTy::Value(_, ValueTy::Matrix(..)) => {
            quote!(::warp_launch::TypedArg::Value(#name.as_flattened().as_flattened()))
        }
        ParamTy::Struct(_) => quote!(::warp_launch::TypedArg::of_struct(#name)),
        ParamTy::Array { .. } => quote!(::warp_launch::TypedArg::Array(#name.as_array())),
    }
}

/// How a launch method runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Launch,
    LaunchOn,
    Record,
    Adjoint,
    Tiled,
    TiledOn,
    TiledAdjoint,
    /// The `unsafe` launches of a kernel whose accesses cannot be checked.
    Unchecked,
    TiledUnchecked,
    AdjointUnchecked,
    TiledAdjointUnchecked,
}

impl Method {
    fn adjoint(self) -> bool {
        matches!(
            self,
            Method::Adjoint
                | Method::TiledAdjoint
                | Method::AdjointUnchecked
                | Method::TiledAdjointUnchecked
        )
    }
    fn on_stream(self) -> bool {
        matches!(self, Method::LaunchOn | Method::TiledOn)
    }
    fn tiled(self) -> bool {
        matches!(
            self,
            Method::Tiled
                | Method::TiledOn
                | Method::TiledAdjoint
                | Method::TiledUnchecked
                | Method::TiledAdjointUnchecked
        )
    }
    fn unchecked(self) -> bool {
        matches!(
            self,
            Method::Unchecked
                | Method::TiledUnchecked
                | Method::AdjointUnchecked
                | Method::TiledAdjointUnchecked
        )
    }
}

fn method(k: &KernelModel, m: Method, model: &Model) -> TokenStream {
    let name = match m {
        Method::Launch => "launch",
        Method::LaunchOn => "launch_on",
        Method::Record => "record",
        Method::Adjoint => "launch_adjoint",
        Method::Tiled => "launch_tiled",
        Method::TiledOn => "launch_tiled_on",
        Method::TiledAdjoint => "launch_tiled_adjoint",
        Method::Unchecked => "launch_unchecked",
        Method::TiledUnchecked => "launch_tiled_unchecked",
        Method::AdjointUnchecked => "launch_adjoint_unchecked",
        Method::TiledAdjointUnchecked => "launch_tiled_adjoint_unchecked",
    };
    let fn_name = format_ident!("{name}");
    let generics: Vec<&proc_macro2::Ident> = k
        .params
        .iter()
        .filter_map(|p| match &p.ty {
            ParamTy::Array {
                ndim: None,
                generic,
                ..
            } => Some(generic),
            _ => None,
        })
        .collect();
    let generics = if generics.is_empty() {
        quote!()
    } else {
        quote!(<#(const #generics: usize),*>)
    };
    let mut args = Vec::new();
    let mut prep = Vec::new();
    let mut pass_args = Vec::new();
    for p in &k.params {
        let (id, ty) = (&p.ident, param_type(p, model));
        args.push(quote!(#id: #ty));
        prep.push(prepare(p, id, model));
        pass_args.push(typed_arg(p, id, model));
    }
    if m.adjoint() {
        for p in &k.params {
            let (id, ty) = (&p.adj_ident, param_type(p, model));
            if let ParamTy::Array { .. } = p.ty {
                // Warp's `None`: no adjoint for an input that needs no
                // gradient (the kernel sees a null array_t).
                args.push(quote!(#id: ::core::option::Option<#ty>));
                pass_args.push(quote!(::warp_launch::TypedArg::from(#id)));
                continue;
            }
            args.push(quote!(#id: #ty));
            prep.push(prepare(p, id, model));
            pass_args.push(typed_arg(p, id, model));
        }
    }
    let pass = if m.adjoint() {
        quote!(::warp_launch::Pass::Adjoint)
    } else {
        quote!(::warp_launch::Pass::Forward)
    };
    let stream_param = if m.on_stream() {
        quote!(stream: &::warp_launch::Stream,)
    } else if m.unchecked() {
        quote!(stream: ::core::option::Option<&::warp_launch::Stream>,)
    } else {
        quote!()
    };
    let stream = if m.on_stream() {
        quote!(::core::option::Option::Some(stream))
    } else if m.unchecked() {
        quote!(stream)
    } else {
        quote!(::core::option::Option::None)
    };
    let (ret, call) = match m {
        Method::Record => (
            quote!(::warp_launch::Result<::warp_launch::Launch>),
            quote!(self.0.record_args(#pass, dim, &[#(#pass_args),*])),
        ),
        _ if m.unchecked() => {
            let f = if m.tiled() {
                quote!(launch_tiled_args_unchecked)
            } else {
                quote!(launch_args_unchecked)
            };
            (
                quote!(::warp_launch::Result<()>),
                // render() writes the block's SAFETY comment (quote! keeps none).
                quote!(unsafe { self.0.#f(#pass, dim, #stream, &[#(#pass_args),*]) }),
            )
        }
        _ if m.tiled() => (
            quote!(::warp_launch::Result<()>),
            quote!(self.0.launch_tiled_args(#pass, dim, #stream, &[#(#pass_args),*])),
        ),
        _ => (
            quote!(::warp_launch::Result<()>),
            quote!(self.0.launch_args(#pass, dim, #stream, &[#(#pass_args),*])),
        ),
    };
    let doc = docs(&method_doc(k, m, model));
    let many = k.params.len() * if m.adjoint() { 2 } else { 1 }
        + 1
        + usize::from(m.on_stream() || m.unchecked());
    let allow = if many > 6 {
        quote!(#[allow(clippy::too_many_arguments)])
    } else {
        quote!()
    };
    let unsafety = if m.unchecked() {
        quote!(unsafe)
    } else {
        quote!()
    };
    quote! {
        #doc
        #allow
        pub #unsafety fn #fn_name #generics(
            &self,
            #stream_param
            dim: impl ::core::convert::Into<::warp_launch::Dim>,
            #(#args),*
        ) -> #ret {
            #(#prep)*
            #call
        }
    }
}

fn method_doc(k: &KernelModel, m: Method, model: &Model) -> Vec<String> {
    let key = &k.key;
    let inputs: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
    let adj: Vec<String> = k
        .params
        .iter()
        .map(|p| format!("`{}`", p.adj_ident))
        .collect();
    let block = model
        .block_dim
        .map_or("the module's block size".to_string(), |b| {
            format!("the module's block size ({b})")
        });
    let mut d: Vec<String> = match m {
        Method::Launch => vec![format!(
            "Launches `{key}` over `dim` (Warp's `wp.launch({key}, dim, inputs=[{}])`) on the current stream of the arrays' device (`cuda:0` without arrays): `Device::stream`, the innermost `ScopedStream`'s or the default one; a stream of another context is refused.",
            inputs.join(", ")
        )],
        Method::LaunchOn => vec![format!(
            "Launches `{key}` over `dim` on `stream`, which must belong to the arrays' device."
        )],
        Method::Record => vec![format!(
            "Checks a launch of `{key}` over `dim` once and returns it as a reusable `Launch` (Warp's `record_cmd=True`), run with `Launch::launch` on the current stream of the arrays' device (`Device::stream`)."
        )],
        Method::Adjoint => vec![format!(
            "Launches the backward kernel of `{key}` over `dim`: the forward arguments, then one adjoint per parameter ({}), as `wp.launch(..., adjoint=True)`; the backward kernel adds the gradients of the inputs into their adjoints.",
            adj.join(", ")
        )],
        Method::Tiled => vec![format!(
            "Launches `{key}` as Warp's `wp.launch_tiled({key}, dim, inputs=[{}])`: {block} is appended to `dim` as one more extent, so each block of threads works on one tile.",
            inputs.join(", ")
        )],
        Method::TiledOn => vec![format!(
            "`launch_tiled` on `stream`, which must belong to the arrays' device."
        )],
        Method::TiledAdjoint => vec![format!(
            "The backward kernel of `{key}`, launched tiled as `launch_tiled` launches the forward one: the forward arguments, then one adjoint per parameter ({}).",
            adj.join(", ")
        )],
        Method::Unchecked => vec![format!(
            "Launches `{key}` over `dim` on `stream` (`None`: the current stream of the arrays' device, `Device::stream`) without the kernel's access rules, which no launch can check for this kernel (see the type's docs); `launch` refuses it with `Error::Unproven`."
        )],
        Method::TiledUnchecked => vec![format!(
            "`launch_tiled` without the kernel's access rules, on `stream` (`None`: the current stream of the arrays' device, `Device::stream`); see `launch_unchecked`."
        )],
        Method::AdjointUnchecked => vec![format!(
            "The backward kernel of `{key}` over `dim` on `stream` (`None`: the current stream of the arrays' device, `Device::stream`) without its access rules: the forward arguments, then one adjoint per parameter ({}).",
            adj.join(", ")
        )],
        Method::TiledAdjointUnchecked => vec![format!(
            "The backward kernel of `{key}`, launched tiled, on `stream` (`None`: the current stream of the arrays' device, `Device::stream`) without its access rules: the forward arguments, then one adjoint per parameter ({}).",
            adj.join(", ")
        )],
    };
    if m.adjoint() {
        d[0].push_str(" An array's adjoint is an `Option`: `None` (Warp's `None`) for an input that needs no gradient passes a null array, and the backward kernel then adds into that array's own gradient if it has one (`Array::with_grad`), else nowhere.");
    }
    if m.unchecked() {
        d.push(String::new());
        d.push("Every other check runs: each array's device and context, the stream's context, the domain, and the module's compiled block size.".into());
        d.push(String::new());
        d.push("# Safety".into());
        d.push(String::new());
        d.push(format!(
            "The caller promises what `LaunchBuilder::unchecked` asks: `{key}`, run over `dim` with these arguments, reads and writes only elements inside the arrays it is given, for every thread the grid runs, and no other memory. Warp's debug mode is no guard: it leaves `x.shape[k]`, native code and preambles unchecked."
        ));
        d.push(String::new());
        d.push("# Errors".into());
        d.push(String::new());
        d.push("Those of `Kernel::launch_args_unchecked`: arrays on different devices or not on the stream's, a stream of another context, and the driver's errors.".into());
        return d;
    }
    d.push(String::new());
    d.push("Checked before the driver sees it, without looking anything up by name: each array's device and context, the kernel's access rules against `dim` (the launch-shape rule), and the module's compiled block size.".into());
    d.push(String::new());
    d.push("# Errors".into());
    d.push(String::new());
    let mut errors = "Those of `Kernel::launch_args`".to_string();
    if m == Method::Record {
        errors = "Those of `Kernel::record_args`".into();
    } else if m.tiled() {
        errors = "Those of `Kernel::launch_tiled_args`".into();
    }
    errors.push_str(": arrays on different devices or not on the stream's, a `dim` an array the kernel indexes by thread coordinate is too small for (`Error::OutOfBounds`)");
    if k.tiled {
        errors.push_str(", a domain that does not fill whole blocks (`Error::PartialTileBlock`)");
    }
    if k.unproven.is_some() || (m.adjoint() && k.unproven_backward.is_some()) {
        errors.push_str(", and always `Error::Unproven` for this kernel (see the type's docs)");
    } else {
        errors.push_str(", a kernel whose accesses cannot be checked (`Error::Unproven`)");
    }
    errors.push_str(", and the driver's errors.");
    d.push(errors);
    d
}

fn kernel_doc(k: &KernelModel, model: &Model) -> Vec<String> {
    let mut d = vec![format!(
        "Typed launcher of the Warp kernel `{}` (module `{}`).",
        k.key, model.module
    )];
    if let Some(py) = &k.python {
        d.push(String::new());
        d.push("```python".into());
        d.push(py.signature.clone());
        if py.truncated {
            d.push("    ...  # (Warp copies only the first line of the signature)".into());
        }
        d.push("```".into());
    }
    d.push(String::new());
    let cu = format!("`{}:{}`", model.cu_file, k.cu_line);
    let python_at = k.python.as_ref().and_then(|p| match (&p.file, p.line) {
        (Some(f), Some(l)) => Some(format!("`{f}:{l}`")),
        (None, Some(l)) => Some(format!("line {l} of the kernel's Python file")),
        _ => None,
    });
    d.push(match python_at {
        Some(p) => format!("Defined at {p}; Warp's CUDA at {cu}."),
        None => format!("Warp's CUDA at {cu}."),
    });
    d.push(String::new());
    d.push("Parameters:".into());
    for p in &k.params {
        let what = match &p.ty {
            ParamTy::Value(dt, v) => format!("`{}` (`{}`)", dt.name, v.text()),
            ParamTy::Array {
                dtype,
                element,
                ndim: Some(n),
                ..
            } => format!(
                "array of `{}`, {n}-D (`&TypedArray<{element}, {n}>`)",
                dtype.name
            ),
            ParamTy::Array {
                dtype,
                element,
                ndim: None,
                generic,
            } => format!(
                "array of `{}` (`&TypedArray<{element}, {generic}>`: its dimensions are not in Warp's output, so any number is accepted)",
                dtype.name
            ),
            ParamTy::Struct(i) => {
                let s = &model.structs[*i];
                format!("the struct `{}` (`&{}`)", s.ty.key(), s.ident)
            }
        };
        let effect = match (&p.ty, &p.effect) {
            (_, Some(e)) => format!(", {}", describe_effect(e, &model.cu_file)),
            (ParamTy::Array { .. }, None) => ", read only".into(),
            _ => String::new(),
        };
        let rust = p.ident.to_string();
        let rust = rust.trim_start_matches("r#");
        if rust == p.name {
            d.push(format!("- `{}`: {what}{effect}", p.name));
        } else {
            d.push(format!("- `{}` (Rust `{rust}`): {what}{effect}", p.name));
        }
    }
    d.push(String::new());
    match &k.unproven {
        Some(u) => {
            d.push(format!(
                "**Safe launches of this kernel are refused** (`Error::Unproven`): at `{}`, {}. It runs only through the `unsafe` `launch_unchecked`, on the caller's promise that it stays inside its arrays.",
                u.location,
                prose(&u.reason)
            ));
        }
        None if k.checks.is_empty() => {
            d.push("The kernel indexes no array, so launches check no access rule.".into());
        }
        None => {
            d.push(format!(
                "Each launch checks these accesses against `dim` and the arrays' shapes (`tid k`: coordinate `k` of `wp.tid()`): {}.",
                k.checks
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if let Some(u) = &k.unproven_backward {
        d.push(String::new());
        d.push(format!(
            "**Safe launches of its backward kernel are refused** (`Error::Unproven`): at `{}`, {}. It runs through the `unsafe` `launch_adjoint_unchecked`.",
            u.location,
            prose(&u.reason)
        ));
    }
    if k.tiled {
        d.push(String::new());
        d.push(format!(
            "A tile kernel: `launch_tiled` appends {} to `dim`, as `wp.launch_tiled` does.",
            model
                .block_dim
                .map_or("the module's block size".to_string(), |b| format!(
                    "the module's block size ({b})"
                ))
        ));
    }
    if k.lean {
        d.push(String::new());
        d.push("Compiled with `grid_stride=False`: one thread per index of `dim`.".into());
    }
    if !k.has_backward {
        d.push(String::new());
        d.push("The module has no backward kernel for it (`enable_backward=False`).".into());
    }
    d
}

fn kernel_item(k: &KernelModel, model: &Model) -> TokenStream {
    let ident = &k.ident;
    let key = &k.key;
    let doc = docs(&kernel_doc(k, model));
    let checks = k.params.iter().map(|p| {
        let name = &p.name;
        let kind = kind_expr(&p.kind, Some(&p.ty), model);
        quote!((#name, #kind))
    });
    let mut methods = vec![
        method(k, Method::Launch, model),
        method(k, Method::LaunchOn, model),
        method(k, Method::Record, model),
    ];
    if k.has_backward {
        methods.push(method(k, Method::Adjoint, model));
    }
    if k.tiled {
        methods.push(method(k, Method::Tiled, model));
        methods.push(method(k, Method::TiledOn, model));
        if k.has_backward {
            methods.push(method(k, Method::TiledAdjoint, model));
        }
    }
    // Kernels whose accesses no launch can check get `unsafe` launches
    // that skip the access rules (the caller's promise instead).
    let backward_unproven =
        k.has_backward && (k.unproven.is_some() || k.unproven_backward.is_some());
    if k.unproven.is_some() {
        methods.push(method(k, Method::Unchecked, model));
        if k.tiled {
            methods.push(method(k, Method::TiledUnchecked, model));
        }
    }
    if backward_unproven {
        methods.push(method(k, Method::AdjointUnchecked, model));
        if k.tiled {
            methods.push(method(k, Method::TiledAdjointUnchecked, model));
        }
    }
    let new_doc = docs(&[
        format!(
            "Takes the kernel `{key}` from `module` and checks that its parameters are this launcher's (names, kinds, dtypes, array dimensions), once."
        ),
        String::new(),
        "# Errors".into(),
        String::new(),
        format!(
            "`Error::NoSuchKernel` when the module has no kernel `{key}`; `Error::Signature` (from `Kernel::check_signature`, naming the parameter and both kinds) when the module's kernel takes other parameters: regenerate the launchers from the module."
        ),
    ]);
    quote! {
        #doc
        #[derive(::core::clone::Clone, ::core::fmt::Debug)]
        pub struct #ident(::warp_launch::Kernel);

        impl #ident {
            /// The kernel's name in its module (Warp's key).
            pub const NAME: &'static str = #key;

            #new_doc
            pub fn new(module: &::warp_launch::AotModule) -> ::warp_launch::Result<Self> {
                let kernel = module.kernel(Self::NAME)?;
                kernel.check_signature(&[#(#checks),*])?;
                ::core::result::Result::Ok(Self(kernel))
            }

            /// The kernel, for what the typed launchers do not cover
            /// (`Kernel::launch` and its builder: `max_blocks`, the tape's
            /// options, the CPU device).
            pub fn kernel(&self) -> &::warp_launch::Kernel {
                &self.0
            }

            #(#methods)*
        }
    }
}

/// A struct holding arrays: typed fields (arrays as `TypedArray`s of
/// their dtype and dimensions), and `to_value`, which makes the checked
/// `StructValue` a launch takes (`StructValue::with_arrays`: the arrays'
/// `array_t`s written at their offsets, the arrays kept alive).
fn array_struct_item(s: &StructModel, model: &Model) -> TokenStream {
    let ident = &s.ident;
    let warp_name = &s.ty.name;
    let doc = docs(&[
        format!(
            "Warp's `wp.struct` `{}` (`{}` in the generated code{}), which holds arrays: {} bytes aligned to {} in Warp's layout.",
            s.ty.key(),
            warp_name,
            s.cu_line
                .map(|l| format!(", `{}:{l}`", model.cu_file))
                .unwrap_or_default(),
            s.ty.size,
            s.ty.align
        ),
        String::new(),
        "A launcher takes it by reference and passes `to_value()`: a `StructValue` that holds its arrays (kept alive while the kernel runs) and that each launch checks as it checks array arguments (device, context, access mode) and notes as used (frees and host reads wait). A kernel's accesses through the arrays it holds are proven as those arrays' own (`h.data`), and every launch checks their rules against the arrays the value holds; backward kernels through held arrays are unproven (`Error::Unproven`, `launch_adjoint_unchecked`).".into(),
    ]);
    let real: Vec<_> = s
        .fields
        .iter()
        .filter(|f| !matches!(f.ty, FieldTy::Pad(_)))
        .collect();
    let fields = real.iter().map(|f| {
        let id = &f.ident;
        let (ty, fdoc) = match &f.ty {
            FieldTy::Value(d, v) => (
                parse_type(&v.text()),
                format!("`{}`: `{}` at byte {}.", f.name, d.name, f.offset),
            ),
            FieldTy::Array {
                dtype,
                element,
                ndim: Some(n),
            } => {
                let e = parse_type(element);
                let nn = Literal::usize_unsuffixed(usize::from(*n));
                (
                    quote!(::warp_launch::TypedArray<#e, #nn>),
                    format!(
                        "`{}`: an array of `{}`, {n}-D, at byte {}.",
                        f.name, dtype.name, f.offset
                    ),
                )
            }
            FieldTy::Array { dtype, .. } => (
                quote!(::warp_launch::Array),
                format!(
                    "`{}`: an array of `{}` at byte {} (its dimensions are not in the Python class as read, so an untyped `Array`; its dtype is checked by `to_value`).",
                    f.name, dtype.name, f.offset
                ),
            ),
            FieldTy::Struct(i) => {
                let inner = &model.structs[*i];
                let t = &inner.ident;
                (
                    quote!(#t),
                    format!(
                        "`{}`: the struct `{}` at byte {}.",
                        f.name,
                        inner.ty.key(),
                        f.offset
                    ),
                )
            }
            FieldTy::Pad(_) => (quote!(()), String::new()),
        };
        let fdoc = docs(&[fdoc]);
        quote!(#fdoc pub #id: #ty)
    });
    let writes = real.iter().map(|f| {
        let id = &f.ident;
        let off = Literal::usize_unsuffixed(f.offset);
        // `at + 0` would be clippy's identity_op in the generated code.
        let pos = if f.offset == 0 {
            quote!(at)
        } else {
            quote!(at + #off)
        };
        match &f.ty {
            FieldTy::Value(_, v) => {
                let v_id = format_ident!("v");
                let prep = prepare_value(*v, &v_id);
                let b = value_bytes(*v, &v_id);
                quote! {
                    {
                        let v = self.#id;
                        #prep
                        let b: &[u8] = #b;
                        if let ::core::option::Option::Some(d) = bytes.get_mut(#pos..#pos + b.len()) {
                            d.copy_from_slice(b);
                        }
                    }
                }
            }
            FieldTy::Array { ndim: Some(_), .. } => {
                quote!(arrays.push(::core::clone::Clone::clone(self.#id.as_array()));)
            }
            FieldTy::Array { .. } => quote!(arrays.push(::core::clone::Clone::clone(&self.#id));),
            FieldTy::Struct(i) if model.structs[*i].holds_arrays => {
                quote!(self.#id.write_fields(bytes, #pos, arrays);)
            }
            FieldTy::Struct(_) => quote! {
                {
                    let b = ::warp_launch::StructRef::of(&self.#id).bytes();
                    if let ::core::option::Option::Some(d) = bytes.get_mut(#pos..#pos + b.len()) {
                        d.copy_from_slice(b);
                    }
                }
            },
            FieldTy::Pad(_) => quote!(),
        }
    });
    let size = Literal::usize_unsuffixed(s.ty.size);
    let field_kinds = s.ty.fields.iter().map(|f| {
        let name = &f.name;
        let kind = kind_expr(&f.kind, None, model);
        quote!((::std::string::String::from(#name), #kind))
    });
    quote! {
        #doc
        #[derive(::core::clone::Clone, ::core::fmt::Debug)]
        pub struct #ident {
            #(#fields),*
        }

        impl #ident {
            /// Warp's declaration of the struct (fields, kinds and C
            /// layout), as launchers check kernels against it.
            pub fn warp_type() -> ::warp_launch::StructType {
                ::warp_launch::StructType::new(#warp_name, ::std::vec![#(#field_kinds),*])
            }

            /// The value a launch takes: its value fields' bytes and its
            /// arrays (`StructValue::with_arrays`, which writes each
            /// array's `array_t` at its field and keeps the arrays alive).
            ///
            /// # Errors
            ///
            /// Those of `StructValue::with_arrays` (`Error::StructArrays`):
            /// an untyped array field of another dtype.
            pub fn to_value(&self) -> ::warp_launch::Result<::warp_launch::StructValue> {
                let mut bytes = ::std::vec![0u8; #size];
                let mut arrays = ::std::vec::Vec::new();
                self.write_fields(&mut bytes, 0, &mut arrays);
                ::warp_launch::StructValue::with_arrays(&Self::warp_type(), bytes, arrays)
            }

            /// Writes the value fields' bytes at `at` of `bytes` and
            /// appends the arrays, in field order (what `to_value` and an
            /// enclosing struct's call).
            #[doc(hidden)]
            pub fn write_fields(
                &self,
                bytes: &mut [u8],
                at: usize,
                arrays: &mut ::std::vec::Vec<::warp_launch::Array>,
            ) {
                let _ = (&bytes, at, &arrays);
                #(#writes)*
            }
        }
    }
}

fn struct_item(s: &StructModel, model: &Model) -> TokenStream {
    if s.holds_arrays {
        return array_struct_item(s, model);
    }
    let ident = &s.ident;
    let warp_name = &s.ty.name;
    let mut doc = vec![format!(
        "Warp's `wp.struct` `{}` (`{}` in the generated code{}): `#[repr(C)]` with Warp's layout, {} bytes aligned to {}.",
        s.ty.key(),
        warp_name,
        s.cu_line
            .map(|l| format!(", `{}:{l}`", model.cu_file))
            .unwrap_or_default(),
        s.ty.size,
        s.ty.align
    )];
    if s.fields.iter().any(|f| matches!(f.ty, FieldTy::Pad(_))) {
        doc.push(String::new());
        doc.push("The C layout's padding is spelled out (`_pad` fields, zero in `Default`), so every byte handed to the kernel is initialised.".into());
    }
    let doc = docs(&doc);
    let fields = s.fields.iter().map(|f| {
        let id = &f.ident;
        let (ty, fdoc) = match &f.ty {
            FieldTy::Value(d, v) => (
                parse_type(&v.text()),
                format!("`{}`: `{}` at byte {}.", f.name, d.name, f.offset),
            ),
            FieldTy::Struct(i) => {
                let inner = &model.structs[*i];
                let t = &inner.ident;
                (
                    quote!(#t),
                    format!(
                        "`{}`: the struct `{}` at byte {}.",
                        f.name,
                        inner.ty.key(),
                        f.offset
                    ),
                )
            }
            // Structs holding arrays are `array_struct_item`'s.
            FieldTy::Array { .. } => (quote!(()), String::new()),
            FieldTy::Pad(n) => {
                let n = Literal::usize_unsuffixed(*n);
                (
                    quote!([u8; #n]),
                    format!("Padding of the C layout at byte {}.", f.offset),
                )
            }
        };
        let fdoc = docs(&[fdoc]);
        quote!(#fdoc pub #id: #ty)
    });
    let size = Literal::usize_unsuffixed(s.ty.size);
    let align = Literal::usize_unsuffixed(s.ty.align);
    let offsets = s
        .fields
        .iter()
        .filter(|f| !matches!(f.ty, FieldTy::Pad(_)))
        .map(|f| {
            let id = &f.ident;
            let off = Literal::usize_unsuffixed(f.offset);
            quote!(|| ::core::mem::offset_of!(#ident, #id) != #off)
        });
    let message = format!(
        "the Rust layout of `{ident}` differs from Warp's `{warp_name}` ({} bytes): regenerate the launchers",
        s.ty.size
    );
    let field_kinds = s.ty.fields.iter().map(|f| {
        let name = &f.name;
        let kind = kind_expr(&f.kind, None, model);
        quote!((::std::string::String::from(#name), #kind))
    });
    quote! {
        #doc
        #[repr(C)]
        #[derive(
            ::core::clone::Clone,
            ::core::marker::Copy,
            ::core::fmt::Debug,
            ::core::default::Default,
            ::core::cmp::PartialEq,
        )]
        pub struct #ident {
            #(#fields),*
        }

        impl #ident {
            /// Warp's declaration of the struct (fields, kinds and C
            /// layout), as launchers check kernels against it.
            pub fn warp_type() -> ::warp_launch::StructType {
                ::warp_launch::StructType::new(#warp_name, ::std::vec![#(#field_kinds),*])
            }
        }

        unsafe impl ::warp_launch::WarpStruct for #ident {
            const NAME: &'static str = #warp_name;
        }

        const _: () = {
            if ::core::mem::size_of::<#ident>() != #size
                || ::core::mem::align_of::<#ident>() != #align
                #(#offsets)*
            {
                ::core::panic!(#message);
            }
        };
    }
}

fn module_item(model: &Model) -> TokenStream {
    let ident = &model.module_ident;
    let module = &model.module;
    let mut doc = vec![
        format!(
            "Typed launchers of the Warp module `{module}` (`{}`{}): one field per kernel, each checked against the module when it is made.",
            model.cu_file,
            model
                .block_dim
                .map(|b| format!(", block_dim {b}"))
                .unwrap_or_default()
        ),
        String::new(),
        match &model.embedded {
            Some(s) => format!(
                "Make it from the loaded module: `{ident}::new(&AotModule::from_embedded(&{s})?)?` (the images embedded beside these launchers)."
            ),
            None => format!(
                "Make it from the loaded module: `{ident}::new(&AotModule::from_embedded(&EMBEDDED)?)?` from its embedded images, or `{ident}::new(&unsafe {{ AotModule::load(dir) }}?)?` from its directory (`unsafe`: the caller vouches that the directory's files come from one Warp compile)."
            ),
        },
    ];
    if !model.skipped.is_empty() {
        doc.push(String::new());
        doc.push("Kernels without a typed launcher (use `AotModule::kernel`):".into());
        for s in &model.skipped {
            doc.push(format!("- `{}`: {}.", s.key, prose(&s.reason)));
        }
    }
    let doc = docs(&doc);
    let fields = model.kernels.iter().map(|k| {
        let f = &k.field;
        let t = &k.ident;
        let d = docs(&[format!("The kernel `{}`.", k.key)]);
        quote!(#d pub #f: #t)
    });
    let inits = model.kernels.iter().map(|k| {
        let f = &k.field;
        let t = &k.ident;
        quote!(#f: #t::new(module)?)
    });
    // A module with no launchable kernel takes nothing from `module`.
    let unused = if model.kernels.is_empty() {
        quote!(let _ = module;)
    } else {
        quote!()
    };
    quote! {
        #doc
        #[derive(::core::clone::Clone, ::core::fmt::Debug)]
        pub struct #ident {
            #(#fields),*
        }

        impl #ident {
            /// The module's name.
            pub const NAME: &'static str = #module;

            /// Takes every kernel from `module`, checking each one's parameters.
            ///
            /// # Errors
            ///
            /// The first error of a kernel's `new`: a kernel missing from the
            /// module, or one whose parameters differ from its launcher's.
            pub fn new(module: &::warp_launch::AotModule) -> ::warp_launch::Result<Self> {
                #unused
                ::core::result::Result::Ok(Self {
                    #(#inits),*
                })
            }
        }
    }
}

/// The SAFETY comment of the `unsafe impl` of struct `s`, in lines.
fn safety_comment(s: &StructModel) -> String {
    let text = format!(
        "SAFETY: `{}` is `#[repr(C)]` with the fields of Warp's `{}` in its order and of \
         the same sizes and alignments, its padding spelled out as fields, and no array or \
         address in it; the `const` check below compares its size, alignment and every offset \
         with Warp's layout.",
        s.ident, s.ty.name
    );
    let mut out = String::new();
    let mut line = String::from("//");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 90 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("//");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// The whole file: banner, module struct, structs, kernels.
pub(super) fn render(model: &Model, banner: &[String]) -> Result<String, String> {
    let module = module_item(model);
    let structs = model.structs.iter().map(|s| struct_item(s, model));
    let kernels = model.kernels.iter().map(|k| kernel_item(k, model));
    let tokens = quote! {
        #module
        #(#structs)*
        #(#kernels)*
    };
    let file: syn::File = syn::parse2(tokens).map_err(|e| e.to_string())?;
    let body = prettyplease::unparse(&file);
    let mut out = String::new();
    for b in banner {
        out.push_str("// ");
        out.push_str(b);
        out.push('\n');
    }
    out.push('\n');
    for line in body.lines() {
        if let Some(name) = line
            .strip_prefix("unsafe impl ::warp_launch::WarpStruct for ")
            .and_then(|r| r.strip_suffix(" {"))
            && let Some(s) = model.structs.iter().find(|s| s.ident == name)
        {
            out.push_str(&safety_comment(s));
            out.push('\n');
        }
        // The one kind of unsafe block the launchers have: an unchecked
        // launch inside an `unsafe fn` whose `# Safety` is its promise.
        if line.trim() == "unsafe {" {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(indent);
            out.push_str(
                "// SAFETY: the caller made this method's `# Safety` promise, which is the one the unchecked launch asks for.",
            );
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}
