//! Warp's tile builtins in a kernel body: which tile loads and stores a
//! launch can check ([`AxisIndex::Tile`] rules), and why the others are
//! refused.
//!
//! What Warp 1.19.0's `native/tile.h` does, and what follows for a launch:
//!
//! - `wp::tile_load<T, BoundsCheck, Aligned, D...>(array, offsets...)`
//!   makes a `tile_global_t`; assigned to a *register* tile
//!   (`tile_register_t`), each thread copies its elements one by one
//!   through `tile_global_t::index`, which, with `BoundsCheck` true, skips
//!   every element whose index `offset + c` (a 32-bit `int`) is at or past
//!   the array's extent on its axis, and computes the address in 64 bits.
//!   `wp::tile_store<T, BoundsCheck, Aligned>(array, offsets..., tile)` and
//!   `wp::tile_atomic_add<T, BoundsCheck>(array, offsets..., tile)` from a
//!   register tile go through the same `index`. So the array's extent
//!   needs no check; what the check misses is an index below 0 (a negative
//!   offset) and an `offset + c` that wraps past `i32::MAX`. Both are ruled
//!   out when every offset is a thread coordinate times a non-negative
//!   constant plus a non-negative constant (the launch checks the wrap:
//!   [`AxisIndex::Tile`]). Axes of the array past the tile's are read at
//!   index 0 and must not be empty (the usual rule for unindexed axes).
//! - With `BoundsCheck` false (`bounds_check=False`) or `Aligned` true
//!   (`aligned=True`, whose checks are debug-only) nothing is skipped:
//!   refused.
//! - Shared-memory tiles (`storage="shared"`, `tile_shared_t`) copy through
//!   a vectorized path that sums `strides[d] / 16 * c` in 32-bit `int`,
//!   which wraps for rows gigabytes long: refused.
//! - The backward functions (`wp::adj_tile_load`, `adj_tile_store`,
//!   `adj_tile_atomic_add`) read and write the adjoint array through the
//!   *primal* array's shape and strides, which a launch does not compare: refused,
//!   as are the indexed forms and every other tile builtin given an array.
//! - Tile code waits at barriers (`__syncthreads`) for the whole block, so a
//!   kernel with a tile rule runs only over domains that fill whole blocks
//!   (what `Kernel::launch_tiled` makes); the launch checks it.

use crate::hash::HashMap;

use super::tokens::{Tok, TokKind, is_punct, spell, split_top_level_commas};
use crate::signature::AxisIndex;

/// Where a tile lives, from its variable's declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TileStorage {
    /// `wp::tile_register_t<...>`: spread over the block's registers.
    Register,
    /// `wp::tile_shared_t<...>`: in shared memory.
    Shared,
}

/// A tile variable's declaration: storage and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TileDecl {
    pub storage: TileStorage,
    pub shape: Vec<u32>,
}

/// Every `wp::tile_register_t<...> NAME` / `wp::tile_shared_t<...> NAME`
/// declared in `body`, with its storage and the dimensions of its first
/// `tile_shape_t<...>`.
pub(super) fn tile_declarations<'a>(body: &[Tok<'a>]) -> HashMap<&'a str, TileDecl> {
    let mut out = HashMap::default();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || j == 0 || !is_punct(body.get(j - 1), ">") {
            continue;
        }
        // The statement's start: just past the previous `;`, `{` or `}`.
        let mut start = j;
        while start > 0 && j - start < 256 {
            if matches!(body[start - 1].text, ";" | "{" | "}") {
                break;
            }
            start -= 1;
        }
        let ty = &body[start..j];
        let storage = match ty
            .iter()
            .find(|t| t.kind == TokKind::Word && t.text != "wp")
        {
            Some(w) if w.text == "tile_register_t" => TileStorage::Register,
            Some(w) if w.text == "tile_shared_t" => TileStorage::Shared,
            _ => continue,
        };
        let Some(s) = ty.iter().position(|t| t.text == "tile_shape_t") else {
            continue;
        };
        let mut shape = Vec::new();
        let mut k = s + 2;
        while let Some(n) = ty.get(k).filter(|n| n.kind == TokKind::Number) {
            match n.text.parse::<u32>() {
                Ok(v) => shape.push(v),
                Err(_) => break,
            }
            if !is_punct(ty.get(k + 1), ",") {
                break;
            }
            k += 2;
        }
        if is_punct(ty.get(s + 1), "<") && !shape.is_empty() {
            out.entry(t.text).or_insert(TileDecl { storage, shape });
        }
    }
    out
}

/// How one tile builtin call at a `wp::tile_*` name was read.
pub(super) enum TileCall {
    /// Not one of the three checkable builtins with template arguments.
    NotTile,
    /// A checkable access: the array argument's token position and the
    /// tile rule of each indexed axis.
    Access {
        array: usize,
        indices: Vec<AxisIndex>,
    },
    /// The builtin with an array argument at `array`, refused for `reason`.
    Refused { array: usize, reason: String },
}

/// Reads the call of `wp::tile_load`, `wp::tile_store` or
/// `wp::tile_atomic_add` whose name is at `j` (template arguments follow).
/// `is_array(pos)`: whether the token at `pos` names an array parameter;
/// `offset(a, b)`: an offset expression's tile start `(coordinate, scale,
/// offset)` or why it has none.
pub(super) fn read_tile_call(
    body: &[Tok<'_>],
    close: &[usize],
    j: usize,
    tiles: &HashMap<&str, TileDecl>,
    is_array: impl Fn(usize) -> bool,
    offset: impl Fn(usize, usize) -> Result<(Option<usize>, u32, u32), String>,
) -> TileCall {
    let name = body[j].text;
    if !matches!(name, "tile_load" | "tile_store" | "tile_atomic_add") {
        return TileCall::NotTile;
    }
    let Some(open) = template_call_open(body, j) else {
        return TileCall::NotTile;
    };
    let gt = open - 1;
    let Some(args) = super::tokens::call_args(body, close, open) else {
        return TileCall::NotTile;
    };
    let Some(&(a0, b0)) = args.first() else {
        return TileCall::NotTile;
    };
    if b0 != a0 + 1 || !is_array(a0) {
        // Not an array parameter: the caller reports what it is.
        return TileCall::NotTile;
    }
    let array = a0;
    let targs = split_top_level_commas(&body[j + 2..gt]);
    let targ = |i: usize| targs.get(i).map(|t| spell(t)).unwrap_or_default();
    let call = format!(
        "wp::{name}<{}>",
        targs
            .iter()
            .map(|t| spell(t))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let refuse = |reason: String| TileCall::Refused { array, reason };
    // Bounds checks on; Aligned (tile_load and tile_store only) off.
    let n_flags = if name == "tile_atomic_add" { 1 } else { 2 };
    if targ(1) != "true" {
        return refuse(format!(
            "`{call}` has its bounds check off (bounds_check=False): the tile may reach past the array"
        ));
    }
    if n_flags == 2 && targ(2) != "false" {
        return refuse(format!(
            "`{call}` is aligned (aligned=True), which skips the bounds checks outside debug builds"
        ));
    }
    // The tile's shape, and the offsets.
    let (shape, offsets, what) = if name == "tile_load" {
        match loaded_tile_shape(body, j, tiles, &targs, &call) {
            Ok(shape) => (shape, &args[1..], "load"),
            Err(reason) => return refuse(reason),
        }
    } else {
        let Some(&tile) = args.last().filter(|_| args.len() >= 3) else {
            return refuse(format!("`{call}` has no tile argument this crate reads"));
        };
        let what = if name == "tile_store" {
            "store"
        } else {
            "atomic add"
        };
        match stored_tile_shape(body, tile, tiles, &call) {
            Ok(shape) => (shape, &args[1..args.len() - 1], what),
            Err(reason) => return refuse(reason),
        }
    };
    match tile_indices(&shape, offsets, offset, &call, what) {
        Ok(indices) => TileCall::Access { array, indices },
        Err(reason) => refuse(reason),
    }
}

/// The shape of the tile `wp::tile_load<...>` at `j` loads (its template
/// arguments `targs`, spelled `call`): literal extents, and the result
/// assigned straight to a register tile; else why it is refused.
fn loaded_tile_shape(
    body: &[Tok<'_>],
    j: usize,
    tiles: &HashMap<&str, TileDecl>,
    targs: &[&[Tok<'_>]],
    call: &str,
) -> Result<Vec<u32>, String> {
    let mut shape = Vec::new();
    for t in targs.iter().skip(3) {
        match t {
            [n] if n.kind == TokKind::Number => match n.text.parse::<u32>() {
                Ok(v) => shape.push(v),
                Err(_) => {
                    return Err(format!(
                        "`{call}`: tile extent {} is not a number this crate reads",
                        n.text
                    ));
                }
            },
            _ => return Err(format!("`{call}`: a tile extent is not a literal")),
        }
    }
    // The result must go straight into a register tile.
    let target =
        (j >= 4 && body[j - 1].text == "::" && body[j - 2].text == "wp" && body[j - 3].text == "=")
            .then(|| body[j - 4].text);
    match target.and_then(|v| tiles.get(v)) {
        Some(d) if d.storage == TileStorage::Register => Ok(shape),
        Some(_) => Err(format!(
            "`{call}` loads into a shared-memory tile (storage=\"shared\"): Warp copies shared tiles through a vectorized path whose element index is a 32-bit int, which wraps for arrays with rows gigabytes long; shared tiles are not analysed"
        )),
        None => Err(format!(
            "`{call}`: the loaded tile is not assigned to a register tile variable"
        )),
    }
}

/// The shape of the tile argument `(ta, tb)` a `wp::tile_store` or
/// `wp::tile_atomic_add` (spelled `call`) writes: a register tile variable;
/// else why it is refused.
fn stored_tile_shape(
    body: &[Tok<'_>],
    (ta, tb): (usize, usize),
    tiles: &HashMap<&str, TileDecl>,
    call: &str,
) -> Result<Vec<u32>, String> {
    let decl = (tb == ta + 1).then(|| tiles.get(body[ta].text)).flatten();
    match decl {
        Some(d) if d.storage == TileStorage::Register => Ok(d.shape.clone()),
        Some(_) => Err(format!(
            "`{call}` stores a shared-memory tile: Warp copies shared tiles through a vectorized path whose element index is a 32-bit int, which wraps for arrays with rows gigabytes long; shared tiles are not analysed"
        )),
        None => Err(format!(
            "`{call}`: its tile `{}` is not a tile variable this crate reads",
            spell(&body[ta..tb])
        )),
    }
}

/// The tile rule of each axis of the tile a `call` (a tile `what`) reaches:
/// one offset argument per tile dimension (1 to 4), each read by `offset`;
/// else why it is refused.
fn tile_indices(
    shape: &[u32],
    offsets: &[(usize, usize)],
    offset: impl Fn(usize, usize) -> Result<(Option<usize>, u32, u32), String>,
    call: &str,
    what: &str,
) -> Result<Vec<AxisIndex>, String> {
    if shape.is_empty() || shape.len() > 4 || shape.len() != offsets.len() {
        return Err(format!(
            "`{call}`: a {}-D tile with {} offset(s)",
            shape.len(),
            offsets.len()
        ));
    }
    let mut indices = Vec::with_capacity(shape.len());
    for (&(a, b), &len) in offsets.iter().zip(shape) {
        match offset(a, b) {
            Ok((thread, scale, offset)) => indices.push(AxisIndex::Tile {
                thread,
                scale,
                offset,
                len,
            }),
            Err(e) => {
                return Err(format!(
                    "tile {what} `{call}`: {e}; Warp's tile bounds checks cover only the array's end, so a start below 0 (or past 2^31) reaches outside it"
                ));
            }
        }
    }
    Ok(indices)
}

/// The `(` of a call `NAME<...>(` whose name is at `j`: just past the `>`
/// closing the template arguments.
pub(super) fn template_call_open(body: &[Tok<'_>], j: usize) -> Option<usize> {
    if !is_punct(body.get(j + 1), "<") {
        return None;
    }
    let mut depth = 0usize;
    for (k, t) in body.iter().enumerate().skip(j + 1).take(256) {
        match t.text {
            "<" => depth += 1,
            ">" => {
                depth -= 1;
                if depth == 0 {
                    return is_punct(body.get(k + 1), "(").then_some(k + 1);
                }
            }
            "(" | ")" | ";" | "{" | "}" => return None,
            _ => {}
        }
    }
    None
}

/// Why a tile builtin other than the three checkable forms may not take an
/// array parameter (`name`: the builtin, without `wp::`).
pub(super) fn refused_builtin(name: &str) -> String {
    if let Some(primal) = name.strip_prefix("adj_") {
        format!(
            "the backward of `wp::{primal}` (`wp::{name}`) reaches the adjoint array through the primal array's shape and strides, which a launch does not compare; backward tile kernels are not analysed"
        )
    } else {
        format!(
            "`wp::{name}` reads or writes the array in a way the tile analysis does not model (only wp::tile_load, wp::tile_store and wp::tile_atomic_add with register tiles are)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{
        TileStorage, loaded_tile_shape, stored_tile_shape, template_call_open, tile_declarations,
        tile_indices,
    };
    use crate::signature::{AccessTarget, Accesses, AxisIndex};
    use crate::source::parse_cu;
    use crate::source::tokens::tokenize;
    use crate::source::tokens::{Tok, split_top_level_commas};

    /// Warp 1.19.0's output for `tests/warp/tiles.py` at block_dim 64.
    const TILES_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_tiles.cu");

    fn accesses(text: &str, kernel: &str) -> Accesses {
        parse_cu(text, "wp_tiles.cu")
            .unwrap()
            .kernel(kernel)
            .unwrap_or_else(|| panic!("no kernel {kernel}"))
            .accesses
            .clone()
    }

    fn tile(thread: Option<usize>, scale: u32, offset: u32, len: u32) -> AxisIndex {
        AxisIndex::Tile {
            thread,
            scale,
            offset,
            len,
        }
    }

    fn rules(a: &Accesses) -> Vec<(&str, Vec<AxisIndex>, usize)> {
        let Accesses::Checked(list) = a else {
            panic!("expected checked accesses, got {a:?}");
        };
        assert!(
            list.iter()
                .all(|r| r.target == AccessTarget::Param && !r.null_ok)
        );
        list.iter()
            .map(|r| (r.param.as_str(), r.indices.clone(), r.line))
            .collect()
    }

    #[test]
    fn register_tile_loads_and_stores_become_tile_rules() {
        // t = wp.tile_load(a, shape=(8, 16), offset=(i * 8, j * 16)); tile_store(out, t * s, ...)
        let both = vec![tile(Some(0), 8, 0, 8), tile(Some(1), 16, 0, 16)];
        assert_eq!(
            rules(&accesses(TILES_CU, "scale_tiles_cuda_kernel_forward")),
            [("a", both.clone(), 702), ("out", both, 708)]
        );
        // t = wp.tile_load(a, shape=(1, 128), offset=(i, 0)); tile_store(out, tile_sum(t), offset=i)
        assert_eq!(
            rules(&accesses(TILES_CU, "row_sums_cuda_kernel_forward")),
            [
                (
                    "a",
                    vec![tile(Some(0), 1, 0, 1), tile(None, 0, 0, 128)],
                    230
                ),
                ("out", vec![tile(Some(0), 1, 0, 1)], 234)
            ]
        );
        // tile_load(a, shape=256, offset=i * 256); tile_atomic_add(total, tile_sum(t), offset=0)
        assert_eq!(
            rules(&accesses(TILES_CU, "total_sum_cuda_kernel_forward")),
            [
                ("a", vec![tile(Some(0), 256, 0, 256)], 453),
                ("total", vec![tile(None, 0, 0, 1)], 456)
            ]
        );
    }

    fn refused(a: &Accesses) -> (&str, &str, &str) {
        let Accesses::Unproven(u) = a else {
            panic!("expected unproven, got {a:?}");
        };
        (u.param.as_str(), u.location.as_str(), u.reason.as_str())
    }

    #[test]
    fn other_tile_accesses_are_unproven_with_their_reason() {
        for (kernel, param, line, says) in [
            (
                "scale_unchecked",
                "a",
                97,
                "bounds check off (bounds_check=False)",
            ),
            ("scale_shared", "a", 564, "shared-memory tile"),
            ("shifted_rows", "a", 343, "the offset `var_5` is computed"),
        ] {
            let a = accesses(TILES_CU, &format!("{kernel}_cuda_kernel_forward"));
            let (p, at, why) = refused(&a);
            assert_eq!(
                (p, at),
                (param, format!("wp_tiles.cu:{line}").as_str()),
                "{kernel}"
            );
            assert!(why.contains(says), "{kernel}: {why}");
        }
        // Backward kernels: the replayed forward loads are fine, the
        // adjoint tile functions are not.
        for (kernel, line, says) in [
            ("scale_tiles", 781, "`wp::adj_tile_store`"),
            ("row_sums", 293, "`wp::adj_tile_store`"),
            ("total_sum", 509, "`wp::adj_tile_atomic_add`"),
        ] {
            let a = accesses(TILES_CU, &format!("{kernel}_cuda_kernel_backward"));
            let (_, at, why) = refused(&a);
            assert_eq!(at, format!("wp_tiles.cu:{line}"), "{kernel}");
            assert!(
                why.contains(says) && why.contains("primal array's shape and strides"),
                "{kernel}: {why}"
            );
        }
    }

    #[test]
    fn changed_offsets_flags_and_foreign_tiles_are_unproven() {
        let fwd = "scale_tiles_cuda_kernel_forward";
        let at = TILES_CU.find(fwd).unwrap();
        let edit = |from: &str, to: &str| {
            let i = at + TILES_CU[at..].find(from).unwrap();
            format!("{}{to}{}", &TILES_CU[..i], &TILES_CU[i + from.len()..])
        };
        for (text, says) in [
            // aligned=True (Warp writes it only for shared tiles; the flag alone refuses).
            (
                edit(
                    "tile_load<wp::float32, true, false, 8, 16>",
                    "tile_load<wp::float32, true, true, 8, 16>",
                ),
                "aligned (aligned=True)",
            ),
            // The coordinate changes before the load (a loop, say).
            (
                edit(
                    "var_5 = wp::mul(var_0, var_2);",
                    "var_5 = wp::mul(var_0, var_2); var_0 += 1;",
                ),
                "assigned again",
            ),
            // A coordinate times data.
            (
                edit(
                    "var_5 = wp::mul(var_0, var_2);",
                    "var_5 = wp::mul(var_0, var_s);",
                ),
                "the offset `var_5` is computed",
            ),
            // A negative constant offset.
            (
                edit(
                    "(var_a, var_5, var_6);",
                    "(var_a, var_77, var_6); const wp::int32 var_77 = -3;",
                ),
                "below 0",
            ),
            // A tile variable of unknown storage.
            (
                edit(
                    "(var_out, var_10, var_11, var_9);",
                    "(var_out, var_10, var_11, var_99);",
                ),
                "not a tile variable",
            ),
            // Offsets that do not match the tile's dimensions.
            (
                edit(
                    "(var_out, var_10, var_11, var_9);",
                    "(var_out, var_10, var_9);",
                ),
                "a 2-D tile with 1 offset(s)",
            ),
            // An indexed tile load.
            (
                edit(
                    "wp::tile_load<wp::float32, true, false, 8, 16>(var_a, var_5, var_6)",
                    "wp::tile_load_indexed<8, 16>(var_a, var_7, 0, var_5, var_6)",
                ),
                "`wp::tile_load_indexed` reads or writes the array",
            ),
        ] {
            let a = accesses(&text, fwd);
            let (_, _, why) = refused(&a);
            assert!(why.contains(says), "{says}: {why}");
        }
        // Offsets as literals and constants are fine.
        let text = edit("(var_a, var_5, var_6);", "(var_a, 0, var_3);");
        assert_eq!(
            rules(&accesses(&text, fwd))[0].1,
            [tile(None, 0, 0, 8), tile(None, 0, 16, 16)]
        );
    }

    #[test]
    fn tile_variables_are_read_with_storage_and_shape() {
        let toks = tokenize(TILES_CU, "wp_tiles.cu").unwrap();
        let decls = tile_declarations(&toks);
        // var_9 is declared in several kernels; the first (scale_unchecked's) wins.
        let d = &decls["var_9"];
        assert_eq!(
            (d.storage, d.shape.as_slice()),
            (TileStorage::Register, &[8, 16][..])
        );
        let shared = "wp::tile_shared_t<wp::float32,wp::tile_layout_strided_t<wp::tile_shape_t<8,16>, wp::tile_stride_t<16,1>>, true> var_9 = x;";
        let toks = tokenize(shared, "s.cu").unwrap();
        let d = &tile_declarations(&toks)["var_9"];
        assert_eq!(
            (d.storage, d.shape.as_slice()),
            (TileStorage::Shared, &[8, 16][..])
        );
    }

    const DECLS: &str = "wp::tile_register_t<wp::float32,wp::tile_layout_register_t<wp::tile_shape_t<8,16>>> var_r; \
        wp::tile_shared_t<wp::float32,wp::tile_layout_strided_t<wp::tile_shape_t<8,16>, wp::tile_stride_t<16,1>>, true> var_s; ";

    /// Runs `f` on the tokens of `DECLS` then `code`, and the position of
    /// the last `tile_*` name (the call's, where `code` has one).
    fn tile_call<R>(code: &str, f: impl FnOnce(&[Tok<'_>], usize) -> R) -> R {
        let text = format!("{DECLS}{code}");
        let toks = tokenize(&text, "t.cu").unwrap();
        let j = toks
            .iter()
            .rposition(|t| t.text.starts_with("tile_"))
            .unwrap();
        f(&toks, j)
    }

    fn targs<'t, 'a>(toks: &'t [Tok<'a>], j: usize) -> Vec<&'t [Tok<'a>]> {
        let open = template_call_open(toks, j).unwrap();
        split_top_level_commas(&toks[j + 2..open - 1])
    }

    #[test]
    fn loaded_tile_shape_is_literal_extents_into_a_register_tile() {
        let shape = |code: &str| {
            tile_call(code, |toks, j| {
                let decls = tile_declarations(toks);
                loaded_tile_shape(toks, j, &decls, &targs(toks, j), "C")
            })
        };
        assert_eq!(
            shape("var_r = wp::tile_load<wp::float32, true, false, 8, 16>(var_a, var_0, var_1);"),
            Ok(vec![8, 16])
        );
        assert_eq!(
            shape("var_s = wp::tile_load<wp::float32, true, false, 8, 16>(var_a, var_0, var_1);")
                .unwrap_err()
                .split(':')
                .next(),
            Some("`C` loads into a shared-memory tile (storage=\"shared\")")
        );
        assert_eq!(
            shape("var_q = wp::tile_load<wp::float32, true, false, 8>(var_a, var_0);"),
            Err("`C`: the loaded tile is not assigned to a register tile variable".into())
        );
        assert_eq!(
            shape("var_r = wp::tile_load<wp::float32, true, false, N>(var_a, var_0);"),
            Err("`C`: a tile extent is not a literal".into())
        );
        assert_eq!(
            shape("var_r = wp::tile_load<wp::float32, true, false, 0x8>(var_a, var_0);"),
            Err("`C`: tile extent 0x8 is not a number this crate reads".into())
        );
    }

    #[test]
    fn stored_tile_shape_is_a_register_tile_variables() {
        tile_call("var_r; var_s; var_r + var_s;", |toks, _| {
            let decls = tile_declarations(toks);
            let at = |text: &str| toks.iter().rposition(|t| t.text == text).unwrap();
            let (r, s) = (at("var_r"), at("var_s"));
            assert_eq!(
                stored_tile_shape(toks, (r, r + 1), &decls, "C"),
                Ok(vec![8, 16])
            );
            assert!(
                stored_tile_shape(toks, (s, s + 1), &decls, "C")
                    .unwrap_err()
                    .starts_with("`C` stores a shared-memory tile")
            );
            assert_eq!(
                stored_tile_shape(toks, (r, s + 1), &decls, "C"),
                Err("`C`: its tile `var_r+var_s` is not a tile variable this crate reads".into())
            );
        });
    }

    #[test]
    fn tile_indices_read_one_offset_per_dimension() {
        // Offsets are token spans; this `offset` reads a span's start as a
        // coordinate, and refuses 9.
        let offset = |a: usize, _b: usize| match a {
            9 => Err("nine".to_owned()),
            a => Ok((Some(a), 2, 1)),
        };
        assert_eq!(
            tile_indices(&[8, 16], &[(0, 1), (1, 2)], offset, "C", "load"),
            Ok(vec![tile(Some(0), 2, 1, 8), tile(Some(1), 2, 1, 16)])
        );
        assert_eq!(
            tile_indices(&[8, 16], &[(0, 1)], offset, "C", "load"),
            Err("`C`: a 2-D tile with 1 offset(s)".into())
        );
        assert_eq!(
            tile_indices(&[1; 5], &[(0, 1); 5], offset, "C", "load"),
            Err("`C`: a 5-D tile with 5 offset(s)".into())
        );
        assert_eq!(
            tile_indices(&[8], &[(9, 10)], offset, "C", "store"),
            Err("tile store `C`: nine; Warp's tile bounds checks cover only the array's end, so a start below 0 (or past 2^31) reaches outside it".into())
        );
    }
}
