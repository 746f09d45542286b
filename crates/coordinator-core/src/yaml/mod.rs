//! A YAML document as a tree of nodes that remember where they came from.
//!
//! Owns YAML 1.2 parsing (through `saphyr-parser` events); the core-schema
//! typing of scalars is [`scalar`](mod@scalar)'s. Every node and every mapping key carries
//! its span, so later checks can point at the exact text. Does not know any
//! project format: decoding into workflow or catalog types lives in [`decode`](crate::decode)
//! users.

mod scalar;

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser};
use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic, Position, Span};

use scalar::scalar;

/// Upper bound on nodes after alias expansion: a guard against "billion laughs" documents.
const MAX_NODES: usize = 200_000;

/// A YAML value with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: NodeValue,
    /// Where the value is written.
    pub span: Span,
}

/// A key of a mapping: always a scalar, kept as its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The key text as written (after YAML unquoting).
    pub text: String,
    /// Where the key is written.
    pub span: Span,
}

/// The kinds of YAML values a project file may contain.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// `null`, `~` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer or a finite float.
    Number(serde_json::Number),
    /// Any other scalar, and every quoted scalar.
    String(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with its entries in document order.
    Map(Vec<(Key, Node)>),
}

impl Node {
    /// The entry of a mapping node with this key, if this is a mapping and has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The entry (key and value) of a mapping node.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        match &self.value {
            NodeValue::Map(entries) => entries.iter().find(|(k, _)| k.text == key).map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// A short name of the node's kind, for messages ("a string", "a mapping").
    pub fn kind(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Number(_) => "a number",
            NodeValue::String(_) => "a string",
            NodeValue::Seq(_) => "a sequence",
            NodeValue::Map(_) => "a mapping",
        }
    }

    /// The node as plain JSON (spans dropped).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Number(n) => Value::Number(n.clone()),
            NodeValue::String(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.text.clone(), v.to_json())).collect())
            }
        }
    }
}

/// One step of a path from the document root to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A path from the document root, used to point diagnostics at text after decoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path(pub Vec<Seg>);

impl Path {
    /// The document root.
    pub fn root() -> Self {
        Path(Vec::new())
    }

    /// This path extended by a mapping key.
    pub fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Path(segs)
    }

    /// This path extended by a sequence index.
    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Path(segs)
    }
}

/// Which text of a mapping entry a diagnostic points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The key (`next:` in `next: foo`).
    Key,
    /// The value (`foo` in `next: foo`).
    Value,
}

impl Node {
    /// The span of the node at `path`, or of its nearest existing ancestor.
    pub fn span_of(&self, path: &Path, part: Part) -> Span {
        let mut node = self;
        let mut last_key: Option<&Key> = None;
        for seg in &path.0 {
            match (seg, &node.value) {
                (Seg::Key(k), NodeValue::Map(_)) => match node.entry(k) {
                    Some((key, value)) => {
                        last_key = Some(key);
                        node = value;
                    }
                    None => return node.span,
                },
                (Seg::Index(i), NodeValue::Seq(items)) => match items.get(*i) {
                    Some(item) => {
                        last_key = None;
                        node = item;
                    }
                    None => return node.span,
                },
                _ => return node.span,
            }
        }
        match (part, last_key) {
            (Part::Key, Some(k)) => k.span,
            _ => node.span,
        }
    }
}

/// Parses one YAML document. `file` names the file in diagnostics.
///
/// # Errors
/// A `yaml.syntax` or `yaml.duplicate-key` diagnostic for the first problem found:
/// after a syntax error the rest of the document cannot be trusted.
pub fn parse(file: &str, text: &str) -> Result<Node, Diagnostic> {
    let mut builder = Builder { file, anchors: HashMap::new(), stack: Vec::new(), root: None, documents: 0, nodes: 0 };
    let end = End::of(text);
    if let Some(at) = lone_carriage_return(text) {
        return Err(Diagnostic::error(
            Code::YamlSyntax,
            file,
            Span::at(at.line, at.column),
            "YAML syntax error: a carriage return not followed by a line feed",
            "end lines with LF or CRLF (a lone CR is an old Mac line ending)",
        ));
    }
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let m = e.marker();
            let mut column = m.col() + 1;
            // The parser marks the character after a bad tab; the caret belongs on the tab.
            let line_text = text.lines().nth(m.line().saturating_sub(1)).unwrap_or_default();
            if e.info().contains("tab") && column > 1 && line_text.chars().nth(column - 2) == Some('\t') {
                column -= 1;
            }
            let (line, column) = end.within(m.line(), column);
            Diagnostic::error(
                Code::YamlSyntax,
                file,
                Span::at(line, column),
                format!("YAML syntax error: {}", e.info()),
                "fix the YAML at this position (indentation, quoting, or a missing `:`)",
            )
        })?;
        builder.event(event, end.span(span.start, span.end))?;
    }
    Ok(builder.root.unwrap_or(Node { value: NodeValue::Null, span: Span::at(1, 1) }))
}

/// The position of the first `\r` not followed by `\n`. YAML reads it as a
/// line break; positions count lines at `\n` (as the renderers and editors'
/// columns do), so after one every position would be off: it is refused.
fn lone_carriage_return(text: &str) -> Option<Position> {
    let (mut line, mut column) = (1, 1);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() != Some(&'\n') => return Some(Position { line, column }),
            '\n' => (line, column) = (line + 1, 1),
            _ => column += 1,
        }
    }
    None
}

/// Where a text's lines end. The parser marks some positions past them: at
/// the end of a text without a final newline (an error there, the end of the
/// last collection) on the line after the last one, and on a directive line
/// it counts a multi-byte character's bytes as columns. Such a position
/// moves back to the end of its line (or of the last line), so every span
/// points into the file.
struct End {
    /// Each line's length in characters (a final newline starts an empty last line).
    lines: Vec<usize>,
}

impl End {
    fn of(text: &str) -> End {
        End { lines: text.split('\n').map(|line| line.chars().count()).collect() }
    }

    /// A 1-based line and column, moved back onto the text.
    fn within(&self, line: usize, column: usize) -> (usize, usize) {
        match line.checked_sub(1).and_then(|i| self.lines.get(i)) {
            Some(length) => (line, column.min(length + 1)),
            // Past the last line: the end of the last line (`split` yields at least one).
            None => (self.lines.len(), self.lines.last().map_or(1, |length| length + 1)),
        }
    }

    fn position(&self, m: Marker) -> Position {
        let (line, column) = self.within(m.line(), m.col() + 1);
        Position { line, column }
    }

    fn span(&self, start: Marker, end: Marker) -> Span {
        Span { start: self.position(start), end: self.position(end) }
    }
}

/// A collection under construction.
enum Open {
    Seq { anchor: usize, start: Span, items: Vec<Node> },
    Map { anchor: usize, start: Span, entries: Vec<(Key, Node)>, key: Option<Key> },
}

struct Builder<'a> {
    file: &'a str,
    anchors: HashMap<usize, Node>,
    stack: Vec<Open>,
    root: Option<Node>,
    documents: usize,
    nodes: usize,
}

impl Builder<'_> {
    fn syntax(&self, span: Span, message: impl Into<String>, help: &str) -> Diagnostic {
        Diagnostic::error(Code::YamlSyntax, self.file, span, message, help)
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Diagnostic> {
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(self.syntax(
                        span,
                        "a second YAML document in one file",
                        "keep one document per file (remove the second `---`)",
                    ));
                }
                Ok(())
            }
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().ok_or_else(|| {
                    self.syntax(
                        span,
                        "an alias to an anchor that is not defined before it",
                        "define the anchor (`&name`) before using `*name`",
                    )
                })?;
                self.nodes += count(&node);
                self.complete(node)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let value = scalar(&text, style, tag.as_deref()).ok_or_else(|| {
                    self.syntax(
                        span,
                        format!("this scalar does not match its tag `{}`", tag.as_deref().unwrap_or("")),
                        "remove the tag or write a value of that type",
                    )
                })?;
                let node = Node { value, span };
                self.remember(anchor, &node);
                self.complete(node)
            }
            Event::SequenceStart(anchor, tag) => {
                self.plain_collection(tag.is_some(), span)?;
                self.stack.push(Open::Seq { anchor, start: span, items: Vec::new() });
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                self.plain_collection(tag.is_some(), span)?;
                self.stack.push(Open::Map { anchor, start: span, entries: Vec::new(), key: None });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Open::Seq { anchor, start, items }) => {
                        let node = Node {
                            value: NodeValue::Seq(items),
                            span: Span { start: start.start, end: span.end.max(start.end) },
                        };
                        self.remember(anchor, &node);
                        node
                    }
                    Some(Open::Map { anchor, start, entries, .. }) => {
                        let node = Node {
                            value: NodeValue::Map(entries),
                            span: Span { start: start.start, end: span.end.max(start.end) },
                        };
                        self.remember(anchor, &node);
                        node
                    }
                    None => {
                        return Err(self.syntax(
                            span,
                            "a collection ends that never started",
                            "check the brackets and indentation",
                        ));
                    }
                };
                self.complete(node)
            }
        }
    }

    fn plain_collection(&self, tagged: bool, span: Span) -> Result<(), Diagnostic> {
        if tagged {
            return Err(self.syntax(span, "tags on sequences and mappings are not supported", "remove the tag"));
        }
        Ok(())
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
    }

    /// Places a finished node into its parent (or as the root).
    fn complete(&mut self, node: Node) -> Result<(), Diagnostic> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.syntax(
                node.span,
                format!("the document has more than {MAX_NODES} values (after expanding aliases)"),
                "write the document without repeated aliases",
            ));
        }
        let file = self.file;
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some(Open::Seq { items, .. }) => {
                items.push(node);
                Ok(())
            }
            Some(Open::Map { entries, key, .. }) => match key.take() {
                None => {
                    let text = match node.value {
                        NodeValue::String(s) => s,
                        NodeValue::Bool(b) => b.to_string(),
                        NodeValue::Number(n) => n.to_string(),
                        NodeValue::Null => String::new(),
                        NodeValue::Seq(_) | NodeValue::Map(_) => {
                            return Err(Diagnostic::error(
                                Code::YamlSyntax,
                                file,
                                node.span,
                                "a mapping key must be a plain scalar",
                                "write the key as a plain string",
                            ));
                        }
                    };
                    if let Some((first, _)) = entries.iter().find(|(k, _)| k.text == text) {
                        return Err(Diagnostic::error(
                            Code::YamlDuplicateKey,
                            file,
                            node.span,
                            format!(
                                "the key `{text}` appears twice in this mapping (first at line {})",
                                first.span.start.line
                            ),
                            "remove or rename one of the two entries",
                        ));
                    }
                    *key = Some(Key { text, span: node.span });
                    Ok(())
                }
                Some(k) => {
                    entries.push((k, node));
                    Ok(())
                }
            },
        }
    }
}

fn count(node: &Node) -> usize {
    match &node.value {
        NodeValue::Seq(items) => 1 + items.iter().map(count).sum::<usize>(),
        NodeValue::Map(entries) => 1 + entries.iter().map(|(_, v)| 1 + count(v)).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Node {
        match parse("t.yaml", text) {
            Ok(node) => node,
            Err(d) => panic!("unexpected diagnostic: {d:?}"),
        }
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let root = doc("a: 1\nb: -2\nc: 1.5\nd: true\ne: ~\nf: '1'\ng: hello\nh: 0x10\ni: yes\n");
        let json = root.to_json();
        assert_eq!(
            json,
            serde_json::json!({"a": 1, "b": -2, "c": 1.5, "d": true, "e": null, "f": "1", "g": "hello", "h": 16, "i": "yes"})
        );
    }

    #[test]
    fn spans_point_at_keys_and_values() {
        let root = doc("steps:\n  one:\n    next: two\n");
        let path = Path::root().key("steps").key("one").key("next");
        assert_eq!(root.span_of(&path, Part::Value).start, Position { line: 3, column: 11 });
        assert_eq!(root.span_of(&path, Part::Key).start, Position { line: 3, column: 5 });
        let missing = Path::root().key("steps").key("zzz").key("next");
        assert_eq!(root.span_of(&missing, Part::Value).start, Position { line: 2, column: 3 });
    }

    #[test]
    fn duplicate_keys_are_refused_with_the_second_position() {
        let err = parse("t.yaml", "a: 1\nb: 2\na: 3\n").err();
        let err = err.map(|d| (d.code, d.line, d.column));
        assert_eq!(err, Some((Code::YamlDuplicateKey, 3, 1)));
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let err = parse("t.yaml", "a: [1, 2\nb: 3\n").err().map(|d| d.code);
        assert_eq!(err, Some(Code::YamlSyntax));
    }

    #[test]
    fn a_syntax_error_at_the_end_of_a_file_without_a_final_newline_points_inside_it() {
        // The parser marks the line after the last one; found by fuzz/ (target `scenarios`).
        let err = parse("t.yaml", "a: 1\nt").err().map(|d| (d.code, d.line, d.column, d.end_line, d.end_column));
        assert_eq!(err, Some((Code::YamlSyntax, 2, 2, 2, 2)));
    }

    #[test]
    fn the_last_collection_of_a_file_ending_in_spaces_ends_inside_it() {
        // The parser ends the mapping on the line after the last one; found by fuzz/ (target `yaml`).
        let root = doc("a: 1\n  ");
        assert_eq!(root.span.end, Position { line: 2, column: 3 });
    }

    #[test]
    fn a_carriage_return_without_a_line_feed_is_refused_where_it_is() {
        // YAML counts a lone CR as a line break, the renderers and editors' columns do not,
        // so every position after it would be off; found by fuzz/ (targets `yaml`, `project`).
        let err = parse("t.yaml", "a: 1\r\nb: 2\rc: 3\n").err().map(|d| (d.code, d.line, d.column));
        assert_eq!(err, Some((Code::YamlSyntax, 2, 5)));
        assert!(parse("t.yaml", "a: 1\r\nb: 2\r\n").is_ok());
    }

    #[test]
    fn a_position_the_parser_counts_in_bytes_stays_on_its_line() {
        // On a directive line the parser counts a multi-byte character's bytes as columns,
        // placing the error past the end of the line; found by fuzz/ (target `yaml`).
        let err = parse("t.yaml", "%# \u{2014}\u{0}\n").err().map(|d| (d.code, d.line, d.column));
        assert_eq!(err, Some((Code::YamlSyntax, 1, 6)));
    }

    #[test]
    fn aliases_expand_and_bombs_are_refused() {
        let root = doc("a: &x [1, 2]\nb: *x\n");
        assert_eq!(root.to_json(), serde_json::json!({"a": [1, 2], "b": [1, 2]}));
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (i, name) in ["b", "c", "d", "e", "f", "g"].iter().enumerate() {
            let prev = ["a", "b", "c", "d", "e", "f"][i];
            bomb.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert_eq!(parse("t.yaml", &bomb).err().map(|d| d.code), Some(Code::YamlSyntax));
    }

    #[test]
    fn a_second_document_is_refused() {
        assert_eq!(parse("t.yaml", "a: 1\n---\nb: 2\n").err().map(|d| d.code), Some(Code::YamlSyntax));
    }
}
