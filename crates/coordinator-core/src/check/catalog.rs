//! The operation catalog a project is checked against: the built-in products
//! plus the project's own `catalog/*.yaml`.

use std::collections::BTreeMap;

use crate::decode::{self, Decoder};
use crate::diagnostic::{Code, Diagnostic, Span};
use crate::model::catalog::{CatalogFile, EventDescriptor, OperationDescriptor};
use crate::yaml::{self, Node};

/// The built-in catalog files, embedded in the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    ("builtin/breg.yaml", include_str!("../../catalog/breg.yaml")),
    ("builtin/casework.yaml", include_str!("../../catalog/casework.yaml")),
    ("builtin/messaging.yaml", include_str!("../../catalog/messaging.yaml")),
    ("builtin/scheduling.yaml", include_str!("../../catalog/scheduling.yaml")),
    ("builtin/evaluation.yaml", include_str!("../../catalog/evaluation.yaml")),
];

/// One catalog file, decoded, with its node tree for positions.
pub struct LoadedCatalog {
    /// File name (`catalog/permits.yaml`, or `builtin/…` for built-in files).
    pub file: String,
    /// Node tree.
    pub root: Node,
    /// Decoded content.
    pub catalog: CatalogFile,
    /// Whether it is one of the built-in files.
    pub builtin: bool,
}

/// Every operation and event a project may use.
#[derive(Default)]
pub struct Catalog {
    /// Full name (`breg.read-record/v1`) -> descriptor.
    pub operations: BTreeMap<String, OperationDescriptor>,
    /// Full name (`breg.record-created/v1`) -> descriptor.
    pub events: BTreeMap<String, EventDescriptor>,
    /// The files it was built from.
    pub files: Vec<LoadedCatalog>,
    /// Products whose catalog file has errors (or that could not be read at all:
    /// `None` then stands for "some product"); their operations are not reported unknown.
    pub broken: Vec<Option<String>>,
}

impl Catalog {
    /// Whether `name` (`product.op/vN`) may belong to a catalog file that has errors,
    /// in which case it is not reported as unknown (the file's own diagnostics say why).
    pub fn may_be_broken(&self, name: &str) -> bool {
        let product = name.split('.').next().unwrap_or_default();
        self.broken.iter().any(|b| b.as_deref().is_none_or(|p| p == product))
    }
}

/// Parses and decodes one catalog file; diagnostics go to `out`.
///
/// # Errors
/// When the file has an error: the product it names, if that much could be
/// read, so that references to the product are not reported again as unknown.
pub fn load(file: &str, text: &str, builtin: bool, out: &mut Vec<Diagnostic>) -> Result<LoadedCatalog, Option<String>> {
    let root = match yaml::parse(file, text) {
        Ok(root) => root,
        Err(d) => {
            out.push(d);
            return Err(None);
        }
    };
    let mut decoder = Decoder::new(file);
    let catalog = decode::catalog::decode(&mut decoder, &root);
    out.append(&mut decoder.diagnostics);
    match catalog {
        Some(catalog) => Ok(LoadedCatalog { file: file.to_owned(), root, catalog, builtin }),
        None => Err(root.get("product").and_then(|p| match &p.value {
            crate::yaml::NodeValue::String(s) => Some(s.clone()),
            _ => None,
        })),
    }
}

impl Catalog {
    /// The built-in catalog alone.
    ///
    /// # Panics
    /// If an embedded built-in file does not decode: that is a bug in this build,
    /// which the crate's tests catch.
    pub fn builtin() -> Catalog {
        let mut diagnostics = Vec::new();
        let files: Vec<LoadedCatalog> =
            BUILTIN.iter().filter_map(|(file, text)| load(file, text, true, &mut diagnostics).ok()).collect();
        assert!(diagnostics.is_empty(), "the built-in catalog must decode cleanly: {diagnostics:?}");
        let mut catalog = Catalog::default();
        for file in files {
            catalog.add(file, &mut diagnostics);
        }
        catalog
    }

    /// The built-in products' event schemas by full name (`breg.record-created/v1`).
    /// A project catalog cannot shadow a built-in product, so these names mean
    /// the same events in every project.
    pub fn builtin_event_schemas() -> BTreeMap<String, serde_json::Value> {
        Catalog::builtin().events.into_iter().map(|(name, event)| (name, event.schema)).collect()
    }

    /// Adds a project catalog file, refusing a product that is already described.
    pub fn add(&mut self, loaded: LoadedCatalog, out: &mut Vec<Diagnostic>) {
        let product = loaded.catalog.product.clone();
        if let Some(existing) = self.files.iter().find(|f| f.catalog.product == product) {
            let span = loaded.root.entry("product").map_or(Span::at(1, 1), |(_, v)| v.span);
            let (code, message, help) = if existing.builtin {
                (
                    Code::CatalogShadowsBuiltin,
                    format!("the product `{product}` is built in; a project catalog cannot redefine it"),
                    "give your product another name".to_owned(),
                )
            } else {
                (
                    Code::CatalogDuplicateProduct,
                    format!("the product `{product}` is already described by `{}`", existing.file),
                    "describe each product in one catalog file".to_owned(),
                )
            };
            out.push(Diagnostic::error(code, &loaded.file, span, message, help));
            return;
        }
        for (name, op) in &loaded.catalog.operations {
            self.operations.insert(format!("{product}.{name}"), op.clone());
        }
        for (name, ev) in &loaded.catalog.events {
            self.events.insert(format!("{product}.{name}"), ev.clone());
        }
        self.files.push(loaded);
    }
}
