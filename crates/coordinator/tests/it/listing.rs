//! `GET /v1/runs`: the caller's runs, oldest first, with filters and an opaque cursor.

use crate::support::{admit, get, on_runtime, start};

#[test]
fn runs_are_listed_page_by_page_and_bad_filters_are_refused() {
    on_runtime(async {
        let dev = start().await;
        let mut admitted = Vec::new();
        for key in ["list-1", "list-2", "list-3"] {
            admitted.push(admit(&dev.url(), &dev.revision, key).await);
        }

        let (status, first) = get(&format!("{}/v1/runs?workflow=reviewed-notice&limit=2", dev.url())).await;
        assert_eq!(status, 200, "{first}");
        let ids = |page: &serde_json::Value| -> Vec<String> {
            page["runs"]
                .as_array()
                .map(|r| r.iter().filter_map(|x| x["runId"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        assert_eq!(ids(&first), admitted[..2].to_vec());
        assert!(first["runs"][0].get("input").is_none(), "no protected payload in a listing");
        let cursor =
            first["next"].as_str().unwrap_or_else(|| panic!("a full page has a next cursor: {first}")).to_owned();

        let (status, second) =
            get(&format!("{}/v1/runs?workflow=reviewed-notice&limit=2&cursor={cursor}", dev.url())).await;
        assert_eq!(status, 200, "{second}");
        assert_eq!(ids(&second), admitted[2..].to_vec());
        assert_eq!(second["next"], serde_json::Value::Null);

        let (_, other) = get(&format!("{}/v1/runs?workflow=someone-else", dev.url())).await;
        assert_eq!(ids(&other), Vec::<String>::new());

        for bad in ["state=sleeping", "limit=0", "limit=501", "cursor=nonsense", "colour=blue"] {
            let (status, error) = get(&format!("{}/v1/runs?{bad}", dev.url())).await;
            assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{bad}: {error}");
        }
    });
}
