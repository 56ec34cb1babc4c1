//! GraphQL over HTTP (same origin, session cookie) with Backend.AI-style error codes.
use gloo_net::http::Request;
use serde_json::{Value, json};

pub struct GqlError {
    pub code: String,
    pub message: String,
}

/// Runs a query or mutation and returns `data`, or the first error with its code.
pub async fn query(query: &str, variables: Value) -> Result<Value, GqlError> {
    let network = |e: String| GqlError {
        code: "NETWORK".into(),
        message: format!("Cannot reach the server: {e}"),
    };
    let req = Request::post("/graphql")
        .json(&json!({"query": query, "variables": variables}))
        .map_err(|e| network(e.to_string()))?;
    let resp = req.send().await.map_err(|e| network(e.to_string()))?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| network(e.to_string()))?;
    if let Some(err) = body.get("errors").and_then(|e| e.get(0)) {
        return Err(GqlError {
            code: err["extensions"]["code"]
                .as_str()
                .unwrap_or("ERROR")
                .to_string(),
            message: err["message"]
                .as_str()
                .unwrap_or("Request failed")
                .to_string(),
        });
    }
    if status >= 400 {
        return Err(GqlError {
            code: body["code"].as_str().unwrap_or("ERROR").to_string(),
            message: body["title"]
                .as_str()
                .unwrap_or("Request failed")
                .to_string(),
        });
    }
    Ok(body.get("data").cloned().unwrap_or(Value::Null))
}
