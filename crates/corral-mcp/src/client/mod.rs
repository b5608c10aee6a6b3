//! Clients of MCP servers that run the server as an owned process tree.
pub mod rmcp;
