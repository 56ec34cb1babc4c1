//! Integration tests live in tests/it (one binary that boots the real server).
