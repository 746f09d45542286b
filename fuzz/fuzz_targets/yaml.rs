//! The YAML reader (`coordinator_core::yaml::parse`): any text parses to a
//! tree or to one `yaml.*` diagnostic, never a panic. Every span (of a node,
//! of a key, of the diagnostic) lies inside the text; a mapping never holds
//! a key twice (duplicates are refused); `span_of` finds each node again by
//! its path; the tree converts to JSON.
#![no_main]

use coordinator_core::diagnostic::{Code, Span};
use coordinator_core::yaml::{self, Node, NodeValue, Part, Path};
use coordinator_fuzz::{assert_spans_inside, inside};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match yaml::parse("f.yaml", text) {
        Ok(root) => {
            walk(text, &root, &root, &Path::root());
            let _ = root.to_json();
        }
        Err(d) => {
            assert!(matches!(d.code, Code::YamlSyntax | Code::YamlDuplicateKey), "{}", d.code.as_str());
            assert_spans_inside(&[d], &|_| Some(text.to_owned()));
        }
    }
});

fn assert_inside(text: &str, span: Span, what: &str) {
    let inside_text = inside(text, span.start) && inside(text, span.end) && span.start <= span.end;
    assert!(inside_text, "{what} span {span:?} is not inside the text");
}

fn walk(text: &str, root: &Node, node: &Node, path: &Path) {
    assert_inside(text, node.span, "node");
    assert_eq!(root.span_of(path, Part::Value), node.span, "span_of does not find the node at {path:?}");
    match &node.value {
        NodeValue::Map(entries) => {
            let mut seen = std::collections::BTreeSet::new();
            for (key, value) in entries {
                assert!(seen.insert(key.text.as_str()), "key {:?} twice in one mapping", key.text);
                assert_inside(text, key.span, "key");
                let at = path.key(&key.text);
                assert_eq!(root.span_of(&at, Part::Key), key.span, "span_of does not find the key at {at:?}");
                walk(text, root, value, &at);
            }
        }
        NodeValue::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(text, root, item, &path.index(i));
            }
        }
        NodeValue::Null | NodeValue::Bool(_) | NodeValue::Number(_) | NodeValue::String(_) => {}
    }
}
