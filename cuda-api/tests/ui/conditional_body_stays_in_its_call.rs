// A conditional node's body graph belongs to the node: the handle that
// builds it in place cannot leave the call (it would outlive the node), nor
// be swapped with a nested body's (ConditionalBody has no constructor, and
// the enclosing body is borrowed while a nested one is built).
use cuda_api::{ConditionalBody, CudaGraph, CudaResult};

fn escape<'g>(g: &mut CudaGraph<'static>) -> CudaResult<&'g mut ConditionalBody<'static, 'g>> {
    let cond = g.condition(None)?;
    let mut out = None;
    g.add_while_with(&cond, &[], |body| -> CudaResult<()> {
        out = Some(body);
        Ok(())
    })?;
    Ok(out.unwrap())
}

fn swap_with_nested(g: &mut CudaGraph<'static>) -> CudaResult<()> {
    let cond = g.condition(None)?;
    g.add_while_with(&cond, &[], |outer| -> CudaResult<()> {
        let inner_cond = outer.condition(None)?;
        outer.add_if_with(&inner_cond, &[], |inner| -> CudaResult<()> {
            std::mem::swap(outer, inner);
            Ok(())
        })?;
        Ok(())
    })?;
    Ok(())
}

fn main() {}
