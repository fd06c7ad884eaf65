//! The lexical layer of the grammar: a text's tokens, each on its line, or
//! the first character sequence outside the grammar.
//!
//! The lexer reads what a C++ compiler reads, and refuses whatever could
//! make the compiler see other tokens than these: backslashes (line
//! splices, universal character names) and `??` anywhere, comments
//! included; digraphs, character literals and digit separators (`'`),
//! string prefixes and raw strings, a byte-order mark, a lone carriage
//! return, control characters, and non-ASCII characters outside comments.
//! Non-ASCII characters inside comments are kept out of the tokens and
//! harmless: comments never reach the compiler, which compiles the
//! re-emitted tokens ([`super::emit`]).
//!
//! A `#` is read only as the first thing on its line (no token and no
//! comment before it), and its line must be one of the directives the
//! grammar names.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A name or a keyword.
    Word,
    /// A number literal, already checked against the literal grammar.
    Number,
    /// A string literal without prefix (`"C"`, `"warp_launch.h"`).
    Str,
    /// An operator or punctuator.
    Punct,
    /// A whole preprocessor line, whitespace squeezed: one of
    /// [`DIRECTIVES`] or `#pragma unroll N`.
    Directive,
}

/// One token and the 1-based line it stands on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Kind,
    pub text: String,
    pub line: usize,
}

/// A text's tokens, its line count, and the first place the lexer refused
/// (its line and what stands there); the tokens after a refusal are read
/// on a best-effort basis, for the kernels' declarations only.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lexed {
    pub tokens: Vec<Token>,
    pub lines: usize,
    pub refusal: Option<(usize, String)>,
}

/// The directives a text may hold (whitespace squeezed), besides
/// `#pragma unroll` with an optional count.
pub(crate) const DIRECTIVES: &[&str] = &[
    "#include \"warp_launch.h\"",
    "#include <warp_launch.h>",
    "#pragma once",
];

/// Punctuators, longest first (C++'s maximal munch).
const PUNCTS: &[&str] = &[
    ">>=", "<<=", "...", "->*", "<=>", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&",
    "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", ".*", "##", "{", "}", "[", "]",
    "(", ")", "<", ">", ";", ":", ",", ".", "?", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~",
    "=", "#",
];

/// Digraphs: C++ reads `<:` as `[`, `:>` as `]`, `<%` as `{`, `%>` as `}`
/// and `%:` as `#`.
const DIGRAPHS: &[&str] = &["<:", ":>", "<%", "%>", "%:"];

/// Reads `text` into tokens.
pub(crate) fn lex(text: &str) -> Lexed {
    let mut lx = Lexer {
        src: text.as_bytes(),
        text,
        pos: 0,
        line: 1,
        line_used: false,
        out: Lexed::default(),
    };
    lx.run();
    lx.out.lines = lx.line;
    lx.out
}

struct Lexer<'t> {
    src: &'t [u8],
    text: &'t str,
    pos: usize,
    line: usize,
    /// Whether a token or a comment already stands on the current line.
    line_used: bool,
    out: Lexed,
}

impl Lexer<'_> {
    fn refuse(&mut self, why: impl Into<String>) {
        if self.out.refusal.is_none() {
            self.out.refusal = Some((self.line, why.into()));
        }
    }

    fn at(&self, k: usize) -> u8 {
        self.src.get(self.pos + k).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: Kind, start: usize) {
        self.out.tokens.push(Token {
            kind,
            text: self.text[start..self.pos].to_string(),
            line: self.line,
        });
        self.line_used = true;
    }

    fn newline(&mut self) {
        self.line += 1;
        self.line_used = false;
    }

    fn run(&mut self) {
        if self.text.starts_with('\u{feff}') {
            self.refuse("a byte-order mark");
            self.pos = 3;
        }
        while self.pos < self.src.len() {
            let c = self.at(0);
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.newline();
                }
                b'\r' if self.at(1) == b'\n' => self.pos += 1,
                b'\r' => {
                    // Compilers read a lone carriage return as a line end;
                    // so do the declarations read past this refusal.
                    self.refuse("a carriage return that does not end a line");
                    self.pos += 1;
                    self.newline();
                }
                b' ' | b'\t' => self.pos += 1,
                b'\\' => {
                    self.refuse("a backslash (a line splice or a universal character name)");
                    self.pos += 1;
                }
                b'?' if self.at(1) == b'?' => {
                    self.refuse("`??` (a trigraph)");
                    self.pos += 2;
                }
                b'/' if self.at(1) == b'/' => self.line_comment(),
                b'/' if self.at(1) == b'*' => self.block_comment(),
                b'#' if !self.line_used => self.directive(),
                b'#' => {
                    self.refuse("a `#` after other text on its line (a directive the reader would not see as one)");
                    self.pos += 1;
                }
                b'\'' => {
                    self.refuse("`'` (a character literal or a digit separator)");
                    self.pos += 1;
                }
                b'"' => self.string(),
                b'0'..=b'9' => self.number(),
                b'.' if self.at(1).is_ascii_digit() => self.number(),
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.word(),
                0x80..=0xff => {
                    let ch = self.text[self.pos..].chars().next().unwrap_or('?');
                    self.refuse(format!("the non-ASCII character {ch:?} outside a comment"));
                    self.pos += ch.len_utf8().max(1);
                }
                _ => self.punct(),
            }
        }
    }

    /// `//` to the end of the line (a backslash or `??` in it is refused
    /// by the scan of the comment's bytes).
    fn line_comment(&mut self) {
        self.line_used = true;
        let end = self.text[self.pos..]
            .find(['\n', '\r'])
            .map_or(self.src.len(), |n| self.pos + n);
        self.comment_bytes(self.pos, end);
        self.pos = end;
    }

    /// `/* ... */`, across lines.
    fn block_comment(&mut self) {
        self.line_used = true;
        let start = self.pos;
        let Some(n) = self.text[self.pos + 2..].find("*/") else {
            self.refuse("a `/*` comment that does not end");
            self.pos = self.src.len();
            return;
        };
        let end = self.pos + 2 + n + 2;
        self.comment_bytes(start, end);
        for &b in &self.src[start..end] {
            if b == b'\n' {
                self.line += 1;
            }
        }
        // The comment's last line has text (the comment) before what follows.
        self.line_used = true;
        self.pos = end;
    }

    /// Refuses what a comment may not hold: backslashes, `??`, a lone
    /// carriage return, control characters.
    fn comment_bytes(&mut self, start: usize, end: usize) {
        let mut at = self.line;
        for k in start..end {
            let b = self.src[k];
            let next = self.src.get(k + 1).copied();
            let why = match b {
                b'\\' => Some("a backslash in a comment (a line splice)"),
                b'?' if next == Some(b'?') => Some("`??` in a comment (a trigraph)"),
                b'\r' if next != Some(b'\n') => Some("a carriage return that does not end a line"),
                b'\n' | b'\t' | b'\r' => None,
                0..=31 | 127 => Some("a control character in a comment"),
                _ => None,
            };
            if let Some(why) = why
                && self.out.refusal.is_none()
            {
                self.out.refusal = Some((at, why.to_string()));
            }
            if b == b'\n' {
                at += 1;
            }
        }
    }

    /// A line starting with `#`: read whole, and refused unless it is one
    /// of [`DIRECTIVES`] or `#pragma unroll [N]`.
    fn directive(&mut self) {
        let start = self.pos;
        let end = self.text[self.pos..]
            .find(['\n', '\r'])
            .map_or(self.src.len(), |n| self.pos + n);
        let raw = &self.text[start..end];
        self.pos = end;
        let squeezed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        let unroll = squeezed == "#pragma unroll"
            || squeezed.strip_prefix("#pragma unroll ").is_some_and(|n| {
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0')
            });
        let clean = raw
            .bytes()
            .all(|b| b.is_ascii() && (b == b'\t' || !b.is_ascii_control()) && b != b'\\');
        if clean && (unroll || DIRECTIVES.contains(&squeezed.as_str())) {
            self.out.tokens.push(Token {
                kind: Kind::Directive,
                text: squeezed,
                line: self.line,
            });
            self.line_used = true;
        } else {
            let shown: String = raw.chars().take(60).collect();
            self.refuse(format!(
                "the preprocessor line `{shown}`: only `#include \"warp_launch.h\"`, `#pragma once` and `#pragma unroll` are read (a macro or another header could change what the tokens mean)"
            ));
            self.line_used = true;
        }
    }

    /// A string literal without prefix, on one line.
    fn string(&mut self) {
        let start = self.pos;
        self.pos += 1;
        while self.pos < self.src.len() && !matches!(self.at(0), b'"' | b'\n') {
            self.pos += 1;
        }
        if self.at(0) != b'"' {
            self.refuse("a string literal that does not end on its line");
            return;
        }
        self.pos += 1;
        if self.at(0).is_ascii_alphanumeric() || self.at(0) == b'_' {
            self.refuse("a suffix after a string literal (a user-defined literal)");
        }
        self.push(Kind::Str, start);
    }

    /// A pp-number, as C++ reads it (digits, letters, `_`, `.`, and a sign
    /// after an exponent letter), checked against the literal grammar.
    fn number(&mut self) {
        let start = self.pos;
        loop {
            let c = self.at(0);
            if matches!(c, b'e' | b'E' | b'p' | b'P') && matches!(self.at(1), b'+' | b'-') {
                self.pos += 2;
            } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
                self.pos += 1;
            } else {
                break;
            }
        }
        let text = &self.text[start..self.pos];
        if !is_literal(text) {
            self.refuse(format!(
                "the number `{text}`: read are decimal and hexadecimal integers (suffixes u, l, ll) and decimal floats (suffix f)"
            ));
        }
        self.push(Kind::Number, start);
    }

    fn word(&mut self) {
        let start = self.pos;
        while self.at(0).is_ascii_alphanumeric() || self.at(0) == b'_' {
            self.pos += 1;
        }
        if self.at(0) == b'"' {
            self.refuse(format!(
                "`{}` before a string (a string prefix or a raw string)",
                &self.text[start..self.pos]
            ));
        }
        self.push(Kind::Word, start);
    }

    fn punct(&mut self) {
        let rest = &self.text[self.pos..];
        if let Some(d) = DIGRAPHS.iter().find(|d| rest.starts_with(**d)) {
            self.refuse(format!("the digraph `{d}`"));
            self.pos += 2;
            return;
        }
        match PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                let start = self.pos;
                self.pos += p.len();
                self.push(Kind::Punct, start);
            }
            None => {
                let c = self.at(0);
                self.refuse(format!("the character {:?}", c as char));
                self.pos += 1;
            }
        }
    }
}

/// Whether a pp-number is a literal of the grammar: `0`, a decimal integer
/// without a leading zero, a hexadecimal integer, each with an optional
/// `u`/`l`/`ll` suffix; or a decimal float (`1.5`, `.5`, `1.`, `1e-3`) with
/// an optional `f`.
pub(crate) fn is_literal(t: &str) -> bool {
    int_value(t).is_some() || is_float(t)
}

/// The value of an integer literal of the grammar (see [`is_literal`]);
/// `None` for anything else, including a value past `i64`.
pub(crate) fn int_value(t: &str) -> Option<i64> {
    let lower = t.to_ascii_lowercase();
    let digits = ["ull", "llu", "ul", "lu", "ll", "u", "l", ""]
        .iter()
        .find_map(|s| lower.strip_suffix(s).filter(|d| !d.is_empty()))?;
    if let Some(hex) = digits.strip_prefix("0x") {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return i64::from_str_radix(hex, 16).ok();
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

fn is_float(t: &str) -> bool {
    let t = t.strip_suffix(['f', 'F']).unwrap_or(t);
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(k) => (&t[..k], Some(&t[k + 1..])),
        None => (t, None),
    };
    if let Some(e) = exponent {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    let (whole, frac) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    match frac {
        Some(f) => digits(whole) && digits(f) && !(whole.is_empty() && f.is_empty()),
        // An integer mantissa needs an exponent to be a float.
        None => exponent.is_some() && !whole.is_empty() && digits(whole),
    }
}
