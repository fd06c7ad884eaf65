//! The re-emission: the tokens the reader read, printed back one line for
//! each line of the text, so that what NVRTC compiles is exactly what was
//! proven (no comment, splice or directive can hide code from the reader),
//! and a compiler's `file(line)` is the text's line.

use super::lex::Lexed;

/// The text of `lexed`'s tokens: each on its own line, separated by one
/// space (every token is whole under C++'s maximal munch, so a space
/// between two never changes how they lex), as many lines as the text had.
pub(crate) fn emit(lexed: &Lexed) -> String {
    let mut out = String::new();
    let mut line = 1;
    let mut first = true;
    for t in &lexed.tokens {
        while line < t.line {
            out.push('\n');
            line += 1;
            first = true;
        }
        if !first {
            out.push(' ');
        }
        out.push_str(&t.text);
        first = false;
    }
    while line < lexed.lines {
        out.push('\n');
        line += 1;
    }
    out
}
