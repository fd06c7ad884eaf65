use warp_launch::EmbeddedModule;

// Building a module promises that its source, images and CPU code come
// from one Warp compile: the constructor is `unsafe`.
fn main() {
    let _ = EmbeddedModule::new("kernels", "/* wp_kernels.cu */", "{}", &[], None);
}
