//! Requests in flight over stdio, bounded: a transport around another that
//! stops reading while as many requests as the bound are unanswered, so a
//! client writing calls without reading the answers waits in its pipe instead
//! of making the module hold every call it wrote.
//!
//! A request takes a slot when it is passed on to rmcp and gives it back
//! once its answer is written, or when the client's `notifications/cancelled`
//! for it is read (rmcp writes no answer to a cancelled request). Nothing
//! that frees a slot needs a line read from the client: a call ends within
//! its tool's timeout and its answer goes out as the client reads. Only one
//! request is read ahead while waiting for a slot, so the notifications
//! before it (a cancellation among them) are always handled first. A
//! handler task that panics writes no answer either: the request carries a
//! [`PanicRelease`] into it, which gives the slot back.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorData, GetExtensions, JsonRpcMessage, JsonRpcRequest,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// `inner` with at most `limit` of the client's requests unanswered at once.
pub(crate) struct BoundedRequests<T> {
    inner: T,
    slots: Arc<Semaphore>,
    /// The request read from `inner` and not yet passed on: it waits for a
    /// slot here, so a `receive` dropped while waiting loses nothing.
    waiting: Option<JsonRpcRequest<ClientRequest>>,
    /// The slot of each request passed on and not yet answered, shared with
    /// the [`PanicRelease`] each carries.
    in_flight: Arc<Mutex<HashMap<RequestId, InFlight>>>,
    /// The number of the next request passed on.
    next_request: u64,
}

/// The slot of one request in flight.
struct InFlight {
    /// Which request of that id holds it (a cancelled request's id can come again).
    request: u64,
    _slot: OwnedSemaphorePermit,
}

/// Carried in a request's extensions into rmcp's handler task (which holds
/// it to the end): dropped while that task panics (tokio drops a panicked
/// task's future as the panic unwinds), it gives the request's slot back, as
/// no answer will come to do so. Dropped otherwise, it does nothing.
struct PanicRelease {
    id: RequestId,
    request: u64,
    in_flight: Weak<Mutex<HashMap<RequestId, InFlight>>>,
}

impl Drop for PanicRelease {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Some(in_flight) = self.in_flight.upgrade() else { return };
        let mut in_flight = lock(&in_flight);
        if in_flight.get(&self.id).is_some_and(|slot| slot.request == self.request) {
            tracing::warn!(id = %self.id, "an MCP handler panicked without answering; its request's slot is given back");
            in_flight.remove(&self.id);
        }
    }
}

/// The requests in flight; never held across an await, and still usable
/// after a panic elsewhere.
fn lock(in_flight: &Mutex<HashMap<RequestId, InFlight>>) -> MutexGuard<'_, HashMap<RequestId, InFlight>> {
    in_flight.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> BoundedRequests<T> {
    /// `inner`, passing on at most `limit` (at least 1) unanswered requests.
    pub(crate) fn new(inner: T, limit: usize) -> Self {
        let slots = Arc::new(Semaphore::new(limit.clamp(1, Semaphore::MAX_PERMITS)));
        Self { inner, slots, waiting: None, in_flight: Arc::default(), next_request: 0 }
    }
}

impl<T: Transport<RoleServer>> BoundedRequests<T> {
    /// Answers a request whose id is already in flight with a JSON-RPC error
    /// (rmcp would run it and drop its answer), holding `slot` until the
    /// error is written.
    fn refuse_duplicate(&mut self, id: RequestId, slot: OwnedSemaphorePermit) {
        let message = format!("request id {id} is already in flight; a request needs an id of its own");
        let send = self.inner.send(ServerJsonRpcMessage::error(ErrorData::invalid_request(message, None), Some(id)));
        tokio::spawn(async move {
            if let Err(error) = send.await {
                tracing::debug!(%error, "could not refuse a request reusing an id in flight");
            }
            drop(slot);
        });
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for BoundedRequests<T> {
    type Error = T::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        let slot = answered.and_then(|id| lock(&self.in_flight).remove(id));
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            // Freed once written: an answer the client does not read keeps its slot.
            drop(slot);
            sent
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.waiting.is_none() {
                match self.inner.receive().await? {
                    JsonRpcMessage::Request(request) => self.waiting = Some(request),
                    JsonRpcMessage::Notification(notification) => {
                        if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
                            && let Some(id) = &cancelled.params.request_id
                        {
                            lock(&self.in_flight).remove(id);
                        }
                        return Some(JsonRpcMessage::Notification(notification));
                    }
                    other => return Some(other),
                }
            }
            if self.slots.available_permits() == 0 {
                tracing::debug!("MAX_CONNECTIONS requests in flight on stdio; the next is read once one is answered");
            }
            // The semaphore is never closed.
            let slot = self.slots.clone().acquire_owned().await.ok()?;
            let mut request = self.waiting.take()?;
            let number = self.next_request;
            let refused = match lock(&self.in_flight).entry(request.id.clone()) {
                Entry::Vacant(entry) => {
                    entry.insert(InFlight { request: number, _slot: slot });
                    None
                }
                Entry::Occupied(_) => Some(slot),
            };
            if let Some(slot) = refused {
                self.refuse_duplicate(request.id, slot);
                continue;
            }
            self.next_request += 1;
            let release =
                PanicRelease { id: request.id.clone(), request: number, in_flight: Arc::downgrade(&self.in_flight) };
            request.request.extensions_mut().insert(Arc::new(release));
            return Some(JsonRpcMessage::Request(request));
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;
    use rmcp::model::{EmptyResult, ServerResult};
    use rmcp::transport::async_rw::AsyncRwTransport;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    fn ping(id: u32) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string()
    }

    fn answer(id: u32) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), RequestId::Number(id.into()))
    }

    fn id_of(message: &ClientJsonRpcMessage) -> Option<RequestId> {
        match message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn requests_wait_for_a_slot_freed_by_an_answer_or_a_cancellation_and_a_reused_id_is_refused() {
        let (server, client) = tokio::io::duplex(64 * 1024);
        let (from_client, mut to_server) = tokio::io::split(client);
        let (read, write) = tokio::io::split(server);
        let mut transport = BoundedRequests::new(AsyncRwTransport::<RoleServer, _, _>::new(read, write), 2);
        let cancel_1 = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
        let lines = [ping(1), ping(2), ping(3), cancel_1.to_string(), ping(3), ping(4)];
        to_server.write_all((lines.join("\n") + "\n").as_bytes()).await.unwrap();
        let number = |id: u32| Some(RequestId::Number(id.into()));

        assert_eq!(id_of(&transport.receive().await.unwrap()), number(1));
        assert_eq!(id_of(&transport.receive().await.unwrap()), number(2));
        assert!(transport.receive().now_or_never().is_none(), "two requests in flight: the third waits");
        transport.send(answer(2)).await.unwrap();
        assert_eq!(id_of(&transport.receive().await.unwrap()), number(3), "the waiting request was kept");
        // 1 and 3 are in flight; the cancellation of 1 needs no slot, and reading it frees 1's (rmcp answers nothing).
        assert!(matches!(transport.receive().await.unwrap(), JsonRpcMessage::Notification(_)));
        // The second 3 takes the freed slot, is refused, and its slot comes back once the refusal is written.
        let fourth =
            tokio::time::timeout(Duration::from_secs(10), transport.receive()).await.expect("a slot came back");
        assert_eq!(id_of(&fourth.unwrap()), number(4));
        assert_eq!(lock(&transport.in_flight).len(), 2, "3 and 4");
        drop(transport);
        let mut answers = BufReader::new(from_client).lines();
        let answer_2: Value = serde_json::from_str(&answers.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer_2["id"], 2);
        let refusal: Value = serde_json::from_str(&answers.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(refusal["id"], 3);
        assert!(refusal["error"]["message"].as_str().unwrap().contains("already in flight"), "{refusal}");
    }

    /// A server whose `tools/list` handler has a bug.
    struct Panicky;

    impl rmcp::ServerHandler for Panicky {
        fn get_info(&self) -> rmcp::model::ServerConfig {
            rmcp::model::ServerConfig::new(rmcp::model::ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            _context: rmcp::service::RequestContext<RoleServer>,
        ) -> Result<rmcp::model::ListToolsResult, ErrorData> {
            tokio::task::yield_now().await;
            panic!("a bug in the handler");
        }
    }

    #[tokio::test]
    async fn a_handler_task_that_panics_gives_its_slot_back() {
        use rmcp::ServiceExt;

        let (server, client) = tokio::io::duplex(64 * 1024);
        let (from_client, mut to_server) = tokio::io::split(client);
        let (read, write) = tokio::io::split(server);
        let transport = BoundedRequests::new(AsyncRwTransport::<RoleServer, _, _>::new(read, write), 1);
        tokio::spawn(async move { Panicky.serve(transport).await.unwrap().waiting().await });
        let lines = [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ];
        let lines: Vec<String> = lines.iter().map(Value::to_string).chain([ping(2)]).collect();
        to_server.write_all((lines.join("\n") + "\n").as_bytes()).await.unwrap();
        let mut answers = BufReader::new(from_client).lines();
        let mut next_id = async || {
            let line = tokio::time::timeout(Duration::from_secs(10), answers.next_line()).await;
            serde_json::from_str::<Value>(&line.expect("an answer: the one slot came back").unwrap().unwrap()).unwrap()
                ["id"]
                .clone()
        };
        assert_eq!(next_id().await, 0);
        // tools/list's task panicked, answering nothing; its slot came back, so the ping was read.
        assert_eq!(next_id().await, 2);
    }
}
