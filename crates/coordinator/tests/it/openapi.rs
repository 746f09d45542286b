//! `GET /v1/openapi.json`: the document lists exactly the routes the router
//! serves (the table `api::endpoints` builds it from), every documented
//! route answers on the live server with a status the document lists, and the
//! documented shapes match what the API returns.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{authorized_client, get, on_runtime, post, sample_input, start};

/// The document's (method, path) pairs.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().unwrap_or_else(|| panic!("no paths: {doc}"));
    let mut found = BTreeSet::new();
    for (path, item) in paths {
        let methods = item.as_object().unwrap_or_else(|| panic!("{path} is no path item"));
        for method in methods.keys().filter(|m| ["get", "post", "put", "patch", "delete"].contains(&m.as_str())) {
            found.insert((method.clone(), path.clone()));
        }
    }
    found
}

/// Every `$ref` in `value`.
fn refs(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(target)) => into.push(target.clone()),
                    _ => refs(v, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, into)),
        _ => {}
    }
}

/// A shallow check of `value` against a component schema: every required
/// property is there and no property is undocumented.
pub fn conforms(doc: &Value, schema: &str, value: &Value) {
    let schema_doc = &doc["components"]["schemas"][schema];
    let properties = schema_doc["properties"].as_object().unwrap_or_else(|| panic!("{schema} has no properties"));
    let object = value.as_object().unwrap_or_else(|| panic!("{schema}: not an object: {value}"));
    for required in schema_doc["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        assert!(object.contains_key(required), "{schema}: `{required}` missing from {value}");
    }
    for key in object.keys() {
        assert!(properties.contains_key(key), "{schema}: `{key}` is not documented ({value})");
    }
}

#[test]
fn the_document_lists_exactly_the_served_routes() {
    on_runtime(async {
        let dev = start().await;
        let (status, doc) = get(&format!("{}/v1/openapi.json", dev.url())).await;
        assert_eq!(status, 200, "{doc}");
        assert_eq!(doc["openapi"], "3.1.0");

        let served: BTreeSet<(String, String)> = coordinator::api::endpoints()
            .into_iter()
            .map(|e| (e.verb.as_str().to_owned(), e.path.to_owned()))
            .collect();
        assert_eq!(documented(&doc), served, "the document and the router disagree");

        let mut targets = Vec::new();
        refs(&doc, &mut targets);
        assert!(!targets.is_empty());
        for target in targets {
            assert!(target.starts_with("#/components/schemas/"), "{target}");
            let resolved = target.strip_prefix('#').and_then(|pointer| doc.pointer(pointer));
            assert!(resolved.is_some_and(Value::is_object), "{target} does not resolve");
        }

        // Each documented route answers (no 404 from the router, no 405) with a
        // documented status, with the operator's token and without one.
        for (client, authorized) in
            [(authorized_client(Duration::from_secs(30)), true), (reqwest::Client::new(), false)]
        {
            for (method, path) in documented(&doc) {
                let concrete = path
                    .replace("{id}", "0199c8a0-0000-7000-8000-000000000000")
                    .replace("{step}", "send-notice")
                    .replace("{connection}", "casework");
                let url = format!("{}{concrete}", dev.url());
                let request = match method.as_str() {
                    "get" => client.get(&url),
                    "post" => client.post(&url),
                    "delete" => client.delete(&url),
                    other => panic!("{other} {path} is documented but no route uses that method"),
                };
                let response = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
                let status = response.status().as_u16();
                let body = response.text().await.unwrap_or_default();
                assert_ne!(status, 405, "{method} {path} is documented but not served");
                if status == 404 {
                    let error: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    assert!(error["code"].is_string(), "{method} {path} is documented but not served");
                }
                let responses = &doc["paths"][&path][&method]["responses"];
                assert!(responses[status.to_string()].is_object(), "{method} {path} answered {status}, not documented");
                if status >= 400 {
                    let error: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    conforms(&doc, "Error", &error);
                }
                let public = doc["paths"][&path][&method]["security"] == json!([]);
                if !authorized {
                    assert_eq!(status == 401, !public, "{method} {path} without a token answered {status}");
                }
            }
        }
    });
}

#[test]
fn the_documented_shapes_are_the_served_ones() {
    on_runtime(async {
        let dev = start().await;
        let (_, doc) = get(&format!("{}/v1/openapi.json", dev.url())).await;
        let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": sample_input()});
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 201, "{admitted}");
        conforms(&doc, "Admitted", &admitted);
        let run = admitted["runId"].as_str().unwrap_or_default().to_owned();

        let (_, view) = get(&format!("{}/v1/runs/{run}", dev.url())).await;
        conforms(&doc, "Run", &view);
        let (_, list) = get(&format!("{}/v1/runs", dev.url())).await;
        conforms(&doc, "RunList", &list);
        list["runs"].as_array().into_iter().flatten().for_each(|r| conforms(&doc, "RunSummary", r));

        let (_, inspection) = get(&format!("{}/v1/runs/{run}/inspection", dev.url())).await;
        conforms(&doc, "Inspection", &inspection);
        for step in inspection["steps"].as_array().into_iter().flatten() {
            conforms(&doc, "InspectedStep", step);
            if step["call"].is_object() {
                conforms(&doc, "CallState", &step["call"]);
            }
            if step["wait"].is_object() {
                conforms(&doc, "WaitState", &step["wait"]);
            }
        }
        let (status, cancelled) = post(&format!("{}/v1/runs/{run}/cancel", dev.url()), &json!({})).await;
        assert_eq!(status, 202, "{cancelled}");
        conforms(&doc, "OperatorResult", &cancelled);
    });
}

#[test]
fn an_authenticated_caller_gets_this_deployments_admission_and_anyone_else_the_generic_one() {
    on_runtime(async {
        let dev = start().await;
        let anonymous: Value = reqwest::get(format!("{}/v1/openapi.json", dev.url()))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .json()
            .await
            .unwrap_or(Value::Null);
        let generic = &anonymous["components"]["schemas"]["AdmitRequest"];
        assert_eq!(generic["properties"]["workflow"]["$ref"], "#/components/schemas/Name", "{generic}");

        let (_, doc) = get(&format!("{}/v1/openapi.json", dev.url())).await;
        let variants = doc["components"]["schemas"]["AdmitRequest"]["oneOf"].as_array().cloned().unwrap_or_default();
        assert_eq!(variants.len(), 1, "one active workflow: {doc}");
        let variant = &variants[0]["properties"];
        assert_eq!(variant["workflow"]["const"], "reviewed-notice");
        assert_eq!(variant["revision"]["const"], json!(dev.revision));
        let input = variant["input"]["$ref"].as_str().unwrap_or_default();
        let input = input.strip_prefix('#').and_then(|p| doc.pointer(p)).cloned().unwrap_or(Value::Null);
        assert_eq!(input["required"], json!(["applicationId", "recipient"]), "the workflow's input schema: {input}");
        let null_input = coordinator_core::json_schema::compile(&input).map(|v| v.is_valid(&Value::Null));
        assert_eq!(null_input.ok(), Some(false), "`input: null` is not valid by this document");

        // A fresh UUIDv7 is within the described window, and admitted; an old one is neither.
        let window = variant["runId"]["anyOf"][0].clone();
        let window = coordinator_core::json_schema::compile(&window).unwrap_or_else(|e| panic!("{e}"));
        let fresh = uuid::Uuid::now_v7().to_string();
        assert!(window.is_valid(&json!(fresh)), "{fresh}");
        let old = "01890a5d-ac96-774b-bcce-b302099a8057";
        assert!(!window.is_valid(&json!(old)));
        let body =
            json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": sample_input(), "runId": fresh});
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!((status, admitted["runId"].as_str()), (201, Some(fresh.as_str())), "{admitted}");
    });
}
