//! What the daemon answers, and to whom: clients that stall, neighbours on the node.

mod clients;
mod neighbours;
