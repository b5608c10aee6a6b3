//! The MCP client runtime (`corral_mcp::client`) against the `mcp-fixture`
//! servers: every path that ends a connection reaches the one teardown
//! (tests named `teardown_*`), calls end with an honest outcome, the read
//! loop survives every malformed frame, reconnects are bounded.

mod backends;
mod calls;
// Shared by every test file; not every file uses every helper.
#[allow(dead_code)]
mod common;
mod handshake;
mod handshake_race;
mod http;
mod http_more;
mod peers;
mod races;
mod readloop;
mod reconnect;
mod stress;
mod task_input;
mod teardown;
