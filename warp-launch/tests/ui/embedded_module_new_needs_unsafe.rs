use warp_launch::EmbeddedModule;

// Building a module promises that its source, images and CPU code come
// from one Warp compile: the constructor is `unsafe`.
fn main() {
    let _ = EmbeddedModule::new("kernels", "/* wp_kernels.cu */", "{}", &[], None);
    // So is putting the compile's facts beside them: facts of another
    // compile could say "no native code" of a module that has some.
    // SAFETY: never loaded; the test is the line below.
    let m = unsafe { EmbeddedModule::new("kernels", "/* wp_kernels.cu */", "{}", &[], None) };
    let _ = m.with_facts("{}");
    // And carried declarations: rules stamped for this source but forged
    // would make an out-of-bounds launch pass as safe.
    let _ = m.with_rules("{}");
}
