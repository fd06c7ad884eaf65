use warp_launch::{EmbeddedImage, EmbeddedModule};

// The access rules of a launch come from a module's source, the code that
// runs from its images and CPU code: only the `unsafe` constructor pairs
// them, so safe code can neither build a module from parts nor put another
// source beside a module's images. (Assigning a field: see
// embedded_module_fields_are_private.rs.)
static IMAGES: &[EmbeddedImage] = &[EmbeddedImage {
    file: "wp_kernels.sm90.cubin",
    bytes: b"\x7fELF",
}];

// SAFETY: never loaded; the test is what does not compile below.
static GENUINE: EmbeddedModule =
    unsafe { EmbeddedModule::new("kernels", "/* wp_kernels.cu */", "{}", IMAGES, None) };

fn main() {
    // A literal with the genuine images and another source.
    let _forged = EmbeddedModule {
        name: "kernels",
        source: "/* another source */",
        meta: "{}",
        images: GENUINE.images(),
        cpu: GENUINE.cpu(),
        facts: GENUINE.facts(),
        rules: GENUINE.rules(),
    };
    // The genuine module with its source replaced (or facts or carried
    // declarations put beside it: `with_facts` and `with_rules` are unsafe).
    let _swapped = EmbeddedModule {
        source: "/* another source */",
        ..GENUINE
    };
}
