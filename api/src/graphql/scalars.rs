//! Backend.AI's custom scalars: `JSONString` (JSON carried as a string) and `BigInt`.
use async_graphql::{InputValueError, InputValueResult, Scalar, ScalarType, Value};

/// A JSON document sent as a string, as Backend.AI's Graphene schema does. Input also accepts
/// a plain GraphQL object for convenience.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonString(pub serde_json::Value);

#[Scalar(name = "JSONString")]
impl ScalarType for JsonString {
    fn parse(value: Value) -> InputValueResult<Self> {
        match value {
            Value::String(s) => serde_json::from_str(&s)
                .map(JsonString)
                .map_err(|e| InputValueError::custom(format!("invalid JSON string: {e}"))),
            other => other
                .into_json()
                .map(JsonString)
                .map_err(|e| InputValueError::custom(format!("invalid JSON value: {e}"))),
        }
    }

    fn to_value(&self) -> Value {
        Value::String(self.0.to_string())
    }
}

/// A 64-bit integer (GraphQL's `Int` is 32-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BigInt(pub i64);

#[Scalar(name = "BigInt")]
impl ScalarType for BigInt {
    fn parse(value: Value) -> InputValueResult<Self> {
        match &value {
            Value::Number(n) => n
                .as_i64()
                .map(BigInt)
                .ok_or_else(|| InputValueError::custom("expected an integer")),
            Value::String(s) => s
                .trim()
                .parse::<i64>()
                .map(BigInt)
                .map_err(|_| InputValueError::custom("expected an integer")),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> Value {
        Value::Number(self.0.into())
    }
}
