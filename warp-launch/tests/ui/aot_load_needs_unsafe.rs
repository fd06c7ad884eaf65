use warp_launch::AotModule;

// Loading a directory trusts that its source and images come from one Warp
// compile (nothing in the directory can prove it): `unsafe`, as loading a
// dynamic library is.
fn main() {
    let _ = AotModule::load("target/warp-aot/aot");
    let _ = AotModule::load_named("target/warp-aot/aot", "kernels");
}
