use warp_launch::EmbeddedModule;

// SAFETY: never loaded; the test is what does not compile below.
static GENUINE: EmbeddedModule =
    unsafe { EmbeddedModule::new("kernels", "/* wp_kernels.cu */", "{}", &[], None) };

// A module's fields cannot be replaced one by one either: its source stays
// the one its images and CPU code were paired with.
fn main() {
    let mut copy = GENUINE;
    copy.source = "/* another source */";
}
