//! Finds where each function of `functions.rhai` is defined, and which
//! names the source itself contains.
//!
//! Rhai's public API reports a script function's name and parameters but not
//! its position, so this module scans the (already compiled, so valid)
//! source for `fn NAME(PARAMS)` outside comments and string literals. It
//! owns only that scan: it must not decide whether the source is valid Rhai
//! (the compiler does) and it never runs anything.

use std::collections::HashSet;

/// One function definition found in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Definition {
    /// The function's name.
    pub name: String,
    /// How many parameters it declares.
    pub params: usize,
    /// 1-based line of the name.
    pub line: usize,
    /// 1-based column (in characters) of the name.
    pub column: usize,
}

/// The parts of the source the definition pattern is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An identifier or keyword, with its 1-based line and column.
    Word(String, usize, usize),
    /// Any string or character literal (its content does not matter).
    Text,
    /// A punctuation character.
    Punct(char),
}

/// Every identifier and keyword of `source` outside comments and literals.
pub(crate) fn words(source: &str) -> HashSet<String> {
    tokenize(source)
        .into_iter()
        .filter_map(|token| match token {
            Token::Word(word, ..) => Some(word),
            Token::Text | Token::Punct(_) => None,
        })
        .collect()
}

/// Every `fn` definition in `source`, in source order.
pub(crate) fn definitions(source: &str) -> Vec<Definition> {
    let tokens = tokenize(source);
    let mut found = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        if let Some((definition, next)) = definition_at(&tokens, index) {
            found.push(definition);
            index = next;
        } else {
            index += 1;
        }
    }
    found
}

/// Matches `fn [TYPE .] NAME ( [PARAM {, PARAM} [,]] )` starting at `start`.
fn definition_at(tokens: &[Token], start: usize) -> Option<(Definition, usize)> {
    let Some(Token::Word(keyword, ..)) = tokens.get(start) else {
        return None;
    };
    if keyword != "fn" {
        return None;
    }
    let mut index = start + 1;
    // A method-style definition names the type of `this` first: `fn int.double()`.
    if matches!(tokens.get(index + 1), Some(Token::Punct('.')))
        && matches!(tokens.get(index), Some(Token::Word(..) | Token::Text))
    {
        index += 2;
    }
    let Some(Token::Word(name, line, column)) = tokens.get(index) else {
        return None;
    };
    index += 1;
    if tokens.get(index) != Some(&Token::Punct('(')) {
        return None;
    }
    index += 1;
    let mut params = 0;
    loop {
        match tokens.get(index)? {
            Token::Punct(')') => break,
            Token::Word(..) => params += 1,
            Token::Punct(',') => {}
            Token::Text | Token::Punct(_) => return None,
        }
        index += 1;
    }
    let definition = Definition { name: name.clone(), params, line: *line, column: *column };
    Some((definition, index + 1))
}

/// A character cursor that keeps the 1-based line and column of the next character.
struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    column: usize,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.bump();
            true
        } else {
            false
        }
    }
}

/// Splits the source into words, punctuation and opaque literals. Inside an
/// interpolated string (`` `...${ expr }...` ``) the code is tokenized too,
/// since it may hold literals of its own.
fn tokenize(source: &str) -> Vec<Token> {
    let mut cursor = Cursor { chars: source.chars().peekable(), line: 1, column: 1 };
    let mut tokens = Vec::new();
    // One entry per open interpolation: the brace depth inside it.
    let mut interpolations: Vec<usize> = Vec::new();
    while let Some(c) = cursor.peek() {
        let (line, column) = (cursor.line, cursor.column);
        cursor.bump();
        match c {
            '/' if cursor.eat('/') => skip_line(&mut cursor),
            '/' if cursor.eat('*') => skip_block_comment(&mut cursor),
            '"' => {
                skip_quoted(&mut cursor, '"');
                tokens.push(Token::Text);
            }
            '\'' => {
                skip_quoted(&mut cursor, '\'');
                tokens.push(Token::Text);
            }
            '`' => {
                if skip_backtick(&mut cursor) {
                    interpolations.push(0);
                }
                tokens.push(Token::Text);
            }
            '#' if matches!(cursor.peek(), Some('"' | '#')) => {
                skip_raw(&mut cursor);
                tokens.push(Token::Text);
            }
            '{' => {
                if let Some(depth) = interpolations.last_mut() {
                    *depth += 1;
                }
                tokens.push(Token::Punct('{'));
            }
            '}' => match interpolations.last_mut() {
                Some(0) => {
                    // The end of `${ ... }`: back inside the backtick string.
                    interpolations.pop();
                    if skip_backtick(&mut cursor) {
                        interpolations.push(0);
                    }
                }
                Some(depth) => {
                    *depth -= 1;
                    tokens.push(Token::Punct('}'));
                }
                None => tokens.push(Token::Punct('}')),
            },
            c if c == '_' || c.is_alphanumeric() => {
                let mut word = String::from(c);
                while let Some(next) = cursor.peek().filter(|n| *n == '_' || n.is_alphanumeric()) {
                    word.push(next);
                    cursor.bump();
                }
                tokens.push(Token::Word(word, line, column));
            }
            c if c.is_whitespace() => {}
            c => tokens.push(Token::Punct(c)),
        }
    }
    tokens
}

fn skip_line(cursor: &mut Cursor<'_>) {
    while cursor.peek().is_some_and(|c| c != '\n') {
        cursor.bump();
    }
}

/// Rhai block comments nest.
fn skip_block_comment(cursor: &mut Cursor<'_>) {
    let mut level = 1;
    while let Some(c) = cursor.bump() {
        if c == '/' && cursor.eat('*') {
            level += 1;
        } else if c == '*' && cursor.eat('/') {
            level -= 1;
            if level == 0 {
                return;
            }
        }
    }
}

/// Skips a `"..."` or `'...'` literal after its opening quote.
fn skip_quoted(cursor: &mut Cursor<'_>, quote: char) {
    while let Some(c) = cursor.bump() {
        if c == '\\' {
            cursor.bump();
        } else if c == quote {
            return;
        }
    }
}

/// Skips a backtick string after its opening backtick (or after the `}`
/// closing an interpolation). Returns true when it stopped at `${`, i.e.
/// code follows.
fn skip_backtick(cursor: &mut Cursor<'_>) -> bool {
    while let Some(c) = cursor.bump() {
        match c {
            '`' => return false,
            '$' if cursor.eat('{') => return true,
            _ => {}
        }
    }
    false
}

/// Skips a raw string `#"..."#` (any number of `#`) after its first `#`.
fn skip_raw(cursor: &mut Cursor<'_>) {
    let mut hashes = 1;
    while cursor.eat('#') {
        hashes += 1;
    }
    if !cursor.eat('"') {
        return;
    }
    while let Some(c) = cursor.bump() {
        if c == '"' {
            let mut closing = 0;
            while closing < hashes && cursor.eat('#') {
                closing += 1;
            }
            if closing == hashes {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(source: &str) -> Vec<(String, usize, usize, usize)> {
        definitions(source).into_iter().map(|d| (d.name, d.params, d.line, d.column)).collect()
    }

    #[test]
    fn finds_plain_and_private_definitions() {
        let source = "fn a() { 1 }\n  private fn b(x, y) {\n x + y }\n";
        assert_eq!(found(source), vec![("a".into(), 0, 1, 4), ("b".into(), 2, 2, 14)]);
    }

    #[test]
    fn ignores_fn_inside_comments_and_strings() {
        let source = concat!(
            "// fn c(x) {}\n",
            "/* fn d() { /* nested */ fn e() {} */\n",
            "fn f(s) { let t = \"fn g(a) {\"; let u = 'x'; let v = #\"fn h()\"#; t }\n",
            "fn i(m) { `${m} fn j() ${ `inner ${m}` } {` }\n",
        );
        assert_eq!(found(source), vec![("f".into(), 1, 3, 4), ("i".into(), 1, 4, 4)]);
    }

    #[test]
    fn finds_method_style_definitions() {
        assert_eq!(found("fn int.twice() { this * 2 }"), vec![("twice".into(), 0, 1, 8)]);
    }
}
