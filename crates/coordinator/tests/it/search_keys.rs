//! Search keys end to end: a workflow declaring `searchKeys` admits runs with
//! them; `GET /v1/runs?key.NAME=VALUE` (and `idempotencyKey=`) finds exactly
//! those runs, alone and combined; a filter that cannot match a key is a 400
//! naming it; the inspection and the console's run page show the keys; the
//! console's runs page filters by one; an input whose key function fails is
//! refused with `input.search-key-failed`, naming the key and not the value,
//! and nothing is admitted.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{console_cookie, console_page, flagship, get, on_runtime, post, start_project, tempdir};

/// The flagship with two search keys: the application id, and the recipient
/// as `kind:id` (which can be longer than a key may be: `recipient.id` allows
/// 128 characters).
fn keyed_project(dir: &Path) -> PathBuf {
    let project = dir.join("keyed");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    let read = |file: &str| std::fs::read_to_string(flagship().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let workflow = read("workflow.yaml").replacen(
        "\nstart: read-application\n",
        "\nsearchKeys:\n  application: {function: application_key, notSecret: true}\n  \
         recipient: {function: recipient_key, notSecret: true, description: kind and id}\n\nstart: read-application\n",
        1,
    );
    assert!(workflow.contains("searchKeys:"), "the flagship no longer has `start: read-application`");
    let functions = read("functions.rhai")
        + "\nfn application_key(input) { input.applicationId }\n\
           fn recipient_key(input) { `${input.recipient.kind}:${input.recipient.id}` }\n";
    for (file, text) in [("workflow.yaml", workflow), ("functions.rhai", functions), ("input.json", read("input.json"))]
    {
        std::fs::write(project.join(file), text).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    project
}

fn input(application: &str, recipient: &str) -> Value {
    json!({"applicationId": application, "recipient": {"kind": "person", "id": recipient}})
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"].as_array().into_iter().flatten().filter_map(|r| r["runId"].as_str().map(str::to_owned)).collect()
}

#[test]
fn runs_are_found_by_their_search_keys_and_idempotency_key() {
    on_runtime(async {
        let dir = tempdir();
        let dev = start_project(keyed_project(dir.path()), None).await;
        let url = dev.url();
        let (x1, x2) = ("0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a11");
        let mut admitted = Vec::new();
        for (key, application, recipient) in [("case-a", x1, "p-1"), ("case-b", x2, "p-2"), ("case-c", x1, "p-3")] {
            let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "idempotencyKey": key,
                "input": input(application, recipient)});
            let (status, run) = post(&format!("{url}/v1/runs"), &body).await;
            assert_eq!(status, 201, "{run}");
            admitted.push(run["runId"].as_str().unwrap_or_default().to_owned());
        }
        let (a, b, c) = (admitted[0].clone(), admitted[1].clone(), admitted[2].clone());

        for (query, expected) in [
            (format!("key.application={x1}"), vec![a.clone(), c.clone()]),
            (format!("key.application={x2}"), vec![b.clone()]),
            (format!("key.application={x1}&key.recipient=person:p-3"), vec![c.clone()]),
            ("workflow=reviewed-notice&key.recipient=person%3Ap-1".to_owned(), vec![a.clone()]),
            ("idempotencyKey=case-b".to_owned(), vec![b.clone()]),
            (format!("idempotencyKey=case-b&key.application={x1}"), vec![]),
            ("key.application=0199c8a0-5C2E-7d41-9b3a-6f1e2d4c8a10".to_owned(), vec![]),
            ("key.nothing=here".to_owned(), vec![]),
        ] {
            let (status, page) = get(&format!("{url}/v1/runs?{query}")).await;
            assert_eq!(status, 200, "{query}: {page}");
            assert_eq!(ids(&page), expected, "{query}");
        }
        for (query, names) in [
            ("key.application=", "`key.application`"),
            ("key.=x", "key.NAME=VALUE"),
            ("key.a%20b=x", "key.NAME=VALUE"),
            ("key.application=a&key.application=b", "`key.application` is given twice"),
            ("key.application=%01x", "control character"),
            ("colour=blue", "unknown filter `colour`"),
            ("state=running&state=finished", "`state` is given twice"),
        ] {
            let (status, error) = get(&format!("{url}/v1/runs?{query}")).await;
            assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{query}: {error}");
            let message = error["message"].as_str().unwrap_or_default();
            assert!(message.contains(names) || query.contains("%01"), "{query}: {message}");
        }

        let (status, inspection) = get(&format!("{url}/v1/runs/{a}/inspection")).await;
        assert_eq!(status, 200, "{inspection}");
        assert_eq!(inspection["searchKeys"], json!({"application": x1, "recipient": "person:p-1"}));
        assert_eq!(inspection["idempotencyKey"], "case-a");

        // An input whose key function returns more than a key may hold: refused, by the key's name only.
        let long = "q".repeat(128);
        let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "idempotencyKey": "case-long",
            "input": input(x2, &long)});
        let (status, error) = post(&format!("{url}/v1/runs"), &body).await;
        assert_eq!((status, error["code"].as_str()), (422, Some("input.search-key-failed")), "{error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("`recipient`") && message.contains("too long"), "{message}");
        assert!(!message.contains(&long) && !message.contains(x2), "{message}");
        let (_, all) = get(&format!("{url}/v1/runs")).await;
        assert_eq!(ids(&all).len(), 3, "nothing admitted: {all}");

        // The console: the run page shows the keys, the runs page filters by one.
        let cookie = console_cookie(&url).await;
        let (status, html) = console_page(&url, &cookie, &format!("/console/runs/{a}")).await;
        assert_eq!(status, 200);
        assert!(html.contains("<dt>Idempotency key</dt><dd><span data-copy>case-a</span></dd>"), "{html}");
        assert!(html.contains(&format!("<dt>Search key</dt><dd>application = {x1}</dd>")), "{html}");
        let (status, html) = console_page(&url, &cookie, &format!("/console/runs?key=application%3D{x2}")).await;
        assert_eq!(status, 200);
        assert!(html.contains(&b) && !html.contains(&a) && !html.contains(&c), "{html}");
        let (status, html) = console_page(&url, &cookie, "/console/runs?idempotencyKey=case-c").await;
        assert_eq!(status, 200);
        assert!(html.contains(&c) && !html.contains(&a) && !html.contains(&b), "{html}");
        let (status, html) = console_page(&url, &cookie, "/console/runs?key=application").await;
        assert_eq!(status, 400);
        assert!(html.contains("NAME=VALUE"), "{html}");
    });
}
