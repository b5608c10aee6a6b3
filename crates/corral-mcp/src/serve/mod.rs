pub mod output;
pub mod request;
pub mod roots;
// Temporary: nothing uses the audit log until the runner lands.
#[allow(dead_code)]
pub(crate) mod audit;
