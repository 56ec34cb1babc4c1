//! Resource presets offered in the launch dialog (superadmins manage them).

use entity::slots::{ResourceSlots, parse_binary_size};
use rust_decimal::prelude::ToPrimitive;

use crate::error::{ApiError, ApiResult};

/// Checks a preset: CPU and memory are required, shared memory (if any) must be smaller
/// than memory.
pub fn validate(slots: &ResourceSlots, shared_memory: Option<i64>) -> ApiResult<()> {
    if slots.get("cpu").is_zero() || slots.get("mem").is_zero() {
        return Err(ApiError::bad_request(
            "A preset needs both cpu and mem greater than zero",
        ));
    }
    if let Some(shm) = shared_memory {
        if shm < 0 {
            return Err(ApiError::bad_request("Shared memory must not be negative"));
        }
        if rust_decimal::Decimal::from(shm) >= slots.get("mem") {
            return Err(ApiError::bad_request(
                "Shared memory must be smaller than the memory (RAM) of the preset",
            ));
        }
    }
    Ok(())
}

/// Parses `1g`, `512m` or bytes; empty = none.
pub fn parse_shared_memory(input: &str) -> ApiResult<Option<i64>> {
    if input.trim().is_empty() {
        return Ok(None);
    }
    parse_binary_size(input)
        .and_then(|d| d.to_i64())
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid shared memory size '{input}' (e.g. 1g, 512m)"
            ))
        })
}
