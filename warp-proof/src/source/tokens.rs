//! A small C++ tokenizer and the bracket helpers the readers share: enough
//! for the forms Warp writes, not a compiler front end.

use super::SourceError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokKind {
    Word,
    Number,
    Str,
    Punct,
}

#[derive(Debug, Clone)]
pub(super) struct Tok<'a> {
    pub(super) kind: TokKind,
    pub(super) text: &'a str,
    pub(super) line: usize,
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Splits C++ text into tokens, dropping whitespace, comments and
/// preprocessor lines. Every slice boundary is next to an ASCII byte or at a
/// whole `char`, so slicing never splits a UTF-8 sequence.
pub(super) fn tokenize<'a>(text: &'a str, file: &str) -> Result<Vec<Tok<'a>>, SourceError> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut at_line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line += 1;
            i += 1;
            at_line_start = true;
            continue;
        }
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b == b'#' && at_line_start {
            // Preprocessor line, with backslash continuations.
            while i < bytes.len() && bytes[i] != b'\n' {
                if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\n') {
                    line += 1;
                    i += 1;
                }
                i += 1;
            }
            continue;
        }
        at_line_start = false;
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let start_line = line;
            i += 2;
            loop {
                if i + 1 >= bytes.len() {
                    return Err(SourceError::new(
                        file,
                        start_line,
                        "unterminated /* comment",
                    ));
                }
                if bytes[i] == b'*' && bytes[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                if bytes[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            continue;
        }
        if b == b'"' || b == b'\'' {
            let start = i;
            let start_line = line;
            i += 1;
            loop {
                match bytes.get(i) {
                    None | Some(b'\n') => {
                        return Err(SourceError::new(
                            file,
                            start_line,
                            "unterminated string or character literal",
                        ));
                    }
                    Some(b'\\') => i += 2,
                    Some(&c) if c == b => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            let end = i.min(bytes.len());
            toks.push(Tok {
                kind: TokKind::Str,
                text: &text[start..end],
                line: start_line,
            });
            continue;
        }
        if is_word_start(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            toks.push(Tok {
                kind: TokKind::Word,
                text: &text[start..i],
                line,
            });
            continue;
        }
        if b.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (is_word_byte(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            toks.push(Tok {
                kind: TokKind::Number,
                text: &text[start..i],
                line,
            });
            continue;
        }
        if b == b':' && bytes.get(i + 1) == Some(&b':') {
            toks.push(Tok {
                kind: TokKind::Punct,
                text: &text[i..i + 2],
                line,
            });
            i += 2;
            continue;
        }
        // Any other character (ASCII punctuation or a whole non-ASCII char).
        let len = text[i..].chars().next().map_or(1, char::len_utf8);
        toks.push(Tok {
            kind: TokKind::Punct,
            text: &text[i..i + len],
            line,
        });
        i += len;
    }
    Ok(toks)
}

/// Joins type tokens: a single space only between two words/numbers.
pub(super) fn spell(toks: &[Tok<'_>]) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    for t in toks {
        let word = matches!(t.kind, TokKind::Word | TokKind::Number);
        if word && prev_word {
            out.push(' ');
        }
        out.push_str(t.text);
        prev_word = word;
    }
    out
}

/// No matching bracket.
pub(super) const UNMATCHED: usize = usize::MAX;

/// For every `(`, `[` and `{`, the index of the bracket of the same kind
/// that closes it (`UNMATCHED` when none does, and for every other token):
/// one pass, so that skipping a bracketed span costs nothing however often
/// it is asked for.
pub(super) fn match_brackets(toks: &[Tok<'_>]) -> Vec<usize> {
    let mut close = vec![UNMATCHED; toks.len()];
    let mut stacks: [Vec<usize>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Punct {
            continue;
        }
        match t.text {
            "(" => stacks[0].push(i),
            "[" => stacks[1].push(i),
            "{" => stacks[2].push(i),
            ")" | "]" | "}" => {
                let k = match t.text {
                    ")" => 0,
                    "]" => 1,
                    _ => 2,
                };
                if let Some(open) = stacks[k].pop() {
                    close[open] = i;
                }
            }
            _ => {}
        }
    }
    close
}

/// Index just past the bracket that closes the one at `open` (same kind,
/// other kinds ignored); `None` when unbalanced. Constant time.
pub(super) fn skip_balanced(close: &[usize], open: usize) -> Option<usize> {
    match close.get(open) {
        Some(&c) if c != UNMATCHED => Some(c + 1),
        _ => None,
    }
}

pub(super) fn is_punct(t: Option<&Tok<'_>>, s: &str) -> bool {
    matches!(t, Some(t) if t.kind == TokKind::Punct && t.text == s)
}

pub(super) fn is_word(t: Option<&Tok<'_>>, s: &str) -> bool {
    matches!(t, Some(t) if t.kind == TokKind::Word && t.text == s)
}

/// The items of a list whose opening bracket comes just before `text`
/// (`a, f(b, c), d) ...` gives `a`, ` f(b, c)`, ` d`): the text up to the
/// closing bracket at depth 0 (or to its end, where the list goes on past
/// it), split at commas outside `()`, `[]`, `{}`, as slices of `text`. Read
/// with the tokenizer, so commas in string literals and comments do not
/// split; `None` where `text` does not tokenize.
#[doc(hidden)]
pub fn list_items(text: &str) -> Option<Vec<&str>> {
    let toks = tokenize(text, "list").ok()?;
    // Every token's text is a slice of `text`.
    let offset = |t: &Tok<'_>| t.text.as_ptr() as usize - text.as_ptr() as usize;
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for t in toks.iter().filter(|t| t.kind == TokKind::Punct) {
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" if depth == 0 => {
                items.push(&text[start..offset(t)]);
                return Some(items);
            }
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                items.push(&text[start..offset(t)]);
                start = offset(t) + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    Some(items)
}

/// Splits `toks` at commas outside `<>`, `()`, `[]`, `{}`.
pub(super) fn split_top_level_commas<'t, 'a>(toks: &'t [Tok<'a>]) -> Vec<&'t [Tok<'a>]> {
    let mut parts = Vec::new();
    let mut depth = 0i64;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Punct {
            continue;
        }
        match t.text {
            "<" | "(" | "[" | "{" => depth += 1,
            ">" | ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    parts
}

/// The text of token `j` of `body`, `""` past its end.
pub(super) fn text_at<'t>(body: &[Tok<'t>], j: usize) -> &'t str {
    body.get(j).map_or("", |t| t.text)
}

/// The arguments of the call whose `(` is at `open` (its `)` at
/// `close[open]`), split at top-level commas; nested brackets are skipped
/// in constant time, so every token is looked at by one call only.
pub(super) fn call_args(
    toks: &[Tok<'_>],
    close: &[usize],
    open: usize,
) -> Option<Vec<(usize, usize)>> {
    let end = *close.get(open)?;
    if end == UNMATCHED {
        return None;
    }
    let mut args = Vec::new();
    let mut start = open + 1;
    let mut j = open + 1;
    while j < end {
        let t = &toks[j];
        if t.kind == TokKind::Punct {
            match t.text {
                "(" | "[" | "{" => {
                    j = skip_balanced(close, j)?;
                    continue;
                }
                "," => {
                    args.push((start, j));
                    start = j + 1;
                }
                _ => {}
            }
        }
        j += 1;
    }
    if start < end || !args.is_empty() {
        args.push((start, end));
    }
    Some(args)
}

/// A short text of the code around token `at` (its line, at most 24
/// tokens either side), for messages.
pub(super) fn code_around(toks: &[Tok<'_>], at: usize) -> String {
    let line = toks[at].line;
    let mut from = at;
    while from > 0 && at - from < 24 && toks[from - 1].line == line {
        from -= 1;
    }
    let mut to = at + 1;
    while to < toks.len() && to - at < 24 && toks[to].line == line {
        to += 1;
    }
    spell(&toks[from..to])
}

/// The bracket table of `toks[start..start + len]`, indices relative to
/// `start` (a bracket closed outside the span counts as unmatched).
pub(super) fn close_local(close: &[usize], start: usize, len: usize) -> Vec<usize> {
    close[start..start + len]
        .iter()
        .map(|&c| {
            if c == UNMATCHED || c < start || c - start >= len {
                UNMATCHED
            } else {
                c - start
            }
        })
        .collect()
}

/// Token helpers of the readers' tests.
#[cfg(test)]
pub(super) mod test_support {
    use super::{Tok, match_brackets, tokenize};

    /// The tokens of `text` and their bracket table.
    pub(crate) fn toks(text: &str) -> (Vec<Tok<'_>>, Vec<usize>) {
        let t = tokenize(text, "t.cu").unwrap();
        let close = match_brackets(&t);
        (t, close)
    }

    /// Position of the `n`th token spelled `text`.
    pub(crate) fn pos(body: &[Tok<'_>], text: &str, n: usize) -> usize {
        body.iter()
            .enumerate()
            .filter(|(_, t)| t.text == text)
            .nth(n)
            .unwrap()
            .0
    }
}

#[cfg(test)]
mod tests {
    use super::{UNMATCHED, close_local, list_items, match_brackets, tokenize};

    #[test]
    fn list_items_split_at_top_level_commas_up_to_the_closing_bracket() {
        // A Python signature after `def k(`: the list ends at its `)`.
        assert_eq!(
            list_items("a: wp.array2d(dtype=float), b: wp.array[float, 3]): # x, y"),
            Some(vec!["a: wp.array2d(dtype=float)", " b: wp.array[float, 3]"])
        );
        // After `wp.array[`: the subscript's arguments.
        assert_eq!(
            list_items("wp.vec3, Literal[2]], c: int"),
            Some(vec!["wp.vec3", " Literal[2]"])
        );
        // Commas and brackets inside strings, and braces, do not split.
        assert_eq!(
            list_items(r#"s: Literal[")", "a,b"], d: dict = {1: 2, 3: 4}, e)"#),
            Some(vec![
                r#"s: Literal[")", "a,b"]"#,
                " d: dict = {1: 2, 3: 4}",
                " e"
            ])
        );
        // A list that goes on past the text (a signature over several lines).
        assert_eq!(list_items("a: int,"), Some(vec!["a: int", ""]));
        assert_eq!(list_items(""), Some(vec![""]));
        assert_eq!(list_items("]"), Some(vec![""]));
        // Text that does not tokenize.
        assert_eq!(list_items(r#"a: Literal["x)"#), None);
    }

    #[test]
    fn close_local_rebases_the_bracket_table_on_the_body() {
        let t = tokenize("f(a) { g(b[0]); } h(", "t.cu").unwrap();
        let close = match_brackets(&t);
        // The body `g(b[0]);` is tokens 5..13.
        let local = close_local(&close, 5, 8);
        assert_eq!(local[1], 6);
        assert_eq!(local[3], 5);
        // `{` at 4 closes at 12, outside: unmatched; `(` of h never closes.
        let outer = close_local(&close, 4, t.len() - 4);
        assert_eq!(outer[0], 9);
        assert_eq!(outer[t.len() - 5], UNMATCHED);
        assert_eq!(close_local(&close, 4, 3)[0], UNMATCHED);
    }
}
