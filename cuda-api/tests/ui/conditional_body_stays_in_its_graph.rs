// A conditional node's body handle belongs to the build closure of one node
// of one graph. Each build closure gets its own brand lifetime, so the body
// of one graph cannot be swapped with, or moved through an outer variable
// into, the body of another graph's build closure (which would leave it
// naming a body graph destroyed with that other graph).
use cuda_api::{ConditionalBody, Context, CudaGraph, CudaResult};

fn swap_across_two_graphs(ctx: &Context) -> CudaResult<()> {
    let mut g1 = CudaGraph::new(ctx)?;
    let c1 = g1.condition(None)?;
    g1.add_if_with(&c1, &[], |b1| -> CudaResult<()> {
        let mut g2 = CudaGraph::new(ctx)?;
        let c2 = g2.condition(None)?;
        g2.add_if_with(&c2, &[], |b2| -> CudaResult<()> {
            std::mem::swap(b1, b2);
            Ok(())
        })?;
        drop(g2);
        // b1 would now name g2's destroyed body graph.
        let c = b1.condition(None)?;
        b1.add_if_with(&c, &[], |_| -> CudaResult<()> { Ok(()) })?;
        Ok(())
    })?;
    g1.instantiate()?;
    Ok(())
}

fn move_out_into_an_outer_option(ctx: &Context) -> CudaResult<()> {
    let mut g1 = CudaGraph::new(ctx)?;
    let mut g2 = CudaGraph::new(ctx)?;
    let (c1, c2) = (g1.condition(None)?, g2.condition(None)?);
    let mut kept: Option<&mut ConditionalBody<'static, '_>> = None;
    g2.add_if_with(&c2, &[], |b2| -> CudaResult<()> {
        kept = Some(b2);
        Ok(())
    })?;
    g1.add_if_with(&c1, &[], |b1| -> CudaResult<()> {
        if let Some(b2) = kept.take() {
            std::mem::swap(b1, b2);
        }
        Ok(())
    })?;
    Ok(())
}

fn main() {}
