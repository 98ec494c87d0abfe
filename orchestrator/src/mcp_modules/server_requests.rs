//! The requests an MCP server sends the orchestrator, its client (`ping`,
//! `roots/list`...), counted until their answers are sent: rmcp answers
//! each in a task of its own and queues the answers behind one another, so
//! a server sending requests faster than the answers go out (thousands a
//! second) would grow the orchestrator's memory without bound. One more
//! than `MAX_MCP_SERVER_REQUESTS` unanswered ends the session: the
//! transport underneath is dropped at once (closing it would wait for
//! rmcp's HTTP worker, itself blocked handing on messages nobody reads any
//! more), the sends under way give up (rmcp would wait seconds for the
//! answers it queued before letting the session's callers go), the reason
//! is kept for the errors that follow, and the module is discovered again
//! so `GET /modules` shows it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, JsonRpcMessage, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerResult,
};
use rmcp::transport::Transport;
use tokio::sync::watch;

/// Why the orchestrator ended a session, once it has.
pub type EndReason = watch::Receiver<Option<String>>;

/// A client transport that ends its session when the server has more than
/// its budget of requests unanswered.
pub struct ServerRequestBudget<T> {
    /// The transport underneath, until the budget ends the session.
    inner: Option<T>,
    module: String,
    max: usize,
    /// The server's requests whose answers are not sent yet.
    unanswered: Arc<Mutex<Unanswered>>,
    /// Whether rmcp drops the answer to a request the server cancelled (the
    /// lifecycle of protocols before 2026-07-28), so a cancelled request is
    /// no longer waiting.
    cancel_drops_answer: bool,
    /// Why the session was ended, once it was; every send under way gives up then.
    ended: watch::Sender<Option<String>>,
    /// Called once when the budget ends the session.
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

/// The server's requests whose answers are not sent yet.
#[derive(Default)]
struct Unanswered {
    /// Those waiting for their answers: a request with one of these ids is a duplicate.
    waiting: HashSet<RequestId>,
    /// How many have their answers produced and being sent: they count
    /// against the budget still, but their ids may be used again (a server
    /// restarting its counter after a reconnect).
    sending: usize,
}

/// What becomes of a message from the server.
enum Admission {
    /// It goes on to rmcp.
    Pass,
    /// A request whose id is already waiting for its answer: read past.
    Duplicate,
    /// A request over the budget: the session ends.
    OverBudget,
}

impl<T> ServerRequestBudget<T> {
    /// `inner`, the transport to the server of `module`, allowing it at most
    /// `max` unanswered requests (`MAX_MCP_SERVER_REQUESTS`); past them
    /// the reason goes to `ended` (shared with a transport that can end the
    /// session too) and `on_end` is called.
    pub fn new(
        inner: T,
        module: &str,
        max: usize,
        ended: watch::Sender<Option<String>>,
        on_end: impl FnOnce() + Send + 'static,
    ) -> Self {
        Self {
            inner: Some(inner),
            module: module.to_owned(),
            max,
            unanswered: Arc::default(),
            cancel_drops_answer: false,
            ended,
            on_end: Some(Box::new(on_end)),
        }
    }

    /// Why this transport ended its session, once it has.
    pub fn end_reason(&self) -> EndReason {
        self.ended.subscribe()
    }

    fn unanswered(&self) -> MutexGuard<'_, Unanswered> {
        self.unanswered.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `message` from the server: a request over the budget ends the
    /// session, and one whose id is already waiting for its answer is read
    /// past (JSON-RPC ids are unique among outstanding requests; rmcp would
    /// answer every copy, uncounted).
    fn admit(&mut self, message: &ServerJsonRpcMessage) -> Admission {
        match message {
            JsonRpcMessage::Request(request) => {
                let mut unanswered = self.unanswered();
                if unanswered.waiting.contains(&request.id) {
                    return Admission::Duplicate;
                }
                if unanswered.waiting.len() + unanswered.sending >= self.max {
                    return Admission::OverBudget;
                }
                unanswered.waiting.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ServerNotification::CancelledNotification(cancelled) = &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                    && self.cancel_drops_answer
                {
                    self.unanswered().waiting.remove(id);
                }
            }
            JsonRpcMessage::Response(response) => {
                if let ServerResult::InitializeResult(server) = &response.result {
                    self.cancel_drops_answer = server.protocol_version < ProtocolVersion::V_2026_07_28;
                }
            }
            JsonRpcMessage::Error(_) => {}
        }
        Admission::Pass
    }

    /// Ends the session for being over the budget.
    fn end(&mut self) {
        let reason = format!(
            "the server had more than MAX_MCP_SERVER_REQUESTS ({}) requests of its own unanswered, so the session was ended",
            self.max
        );
        tracing::warn!(module = %self.module, "{reason}");
        self.inner = None;
        self.ended.send_replace(Some(reason));
        if let Some(on_end) = self.on_end.take() {
            on_end();
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ServerRequestBudget<T> {
    type Error = T::Error;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        // Answered, the request is no longer waiting, though it counts until its answer is sent.
        let counted = answered.is_some_and(|id| {
            let mut unanswered = self.unanswered();
            let waiting = unanswered.waiting.remove(id);
            unanswered.sending += usize::from(waiting);
            waiting
        });
        let sending = self.inner.as_mut().map(|inner| inner.send(item));
        let (unanswered, mut ended) = (Arc::clone(&self.unanswered), self.ended.subscribe());
        async move {
            let Some(sending) = sending else { return Ok(()) };
            let sent = tokio::select! {
                sent = sending => sent,
                _ = ended.wait_for(Option::is_some) => Ok(()),
            };
            if counted {
                unanswered.lock().unwrap_or_else(PoisonError::into_inner).sending -= 1;
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.as_mut()?.receive().await?;
            match self.admit(&message) {
                Admission::Pass => return Some(message),
                Admission::Duplicate => {
                    tracing::debug!(module = %self.module, "skipped a request of the server whose id is already waiting for its answer");
                }
                Admission::OverBudget => {
                    self.end();
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        match &mut self.inner {
            Some(inner) => inner.close().await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A transport that gives out `incoming` and counts what is sent; its
    /// sends never finish when `hang`.
    struct Scripted {
        incoming: VecDeque<ServerJsonRpcMessage>,
        sent: Arc<AtomicUsize>,
        hang: bool,
    }

    impl Transport<RoleClient> for Scripted {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: ClientJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            self.sent.fetch_add(1, Ordering::SeqCst);
            let hang = self.hang;
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
            self.incoming.pop_front()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn message(value: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    fn ping(id: u32) -> ServerJsonRpcMessage {
        message(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
    }

    fn answer(id: u32) -> ClientJsonRpcMessage {
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "result": {}})).unwrap()
    }

    fn cancel(id: u32) -> ServerJsonRpcMessage {
        message(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}))
    }

    fn initialized(version: &str) -> ServerJsonRpcMessage {
        message(json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}
        }}))
    }

    /// A budget of 2 over `incoming`; whether it ended the session; how many messages were sent.
    fn budget(
        incoming: Vec<ServerJsonRpcMessage>,
        hang: bool,
    ) -> (ServerRequestBudget<Scripted>, Arc<AtomicBool>, Arc<AtomicUsize>) {
        let (called, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let flag = Arc::clone(&called);
        let transport = Scripted { incoming: incoming.into(), sent: Arc::clone(&sent), hang };
        let budget = ServerRequestBudget::new(transport, "m", 2, watch::Sender::new(None), move || {
            flag.store(true, Ordering::SeqCst)
        });
        (budget, called, sent)
    }

    #[tokio::test]
    async fn answered_requests_make_room_and_one_over_the_budget_ends_the_session() {
        let (mut budget, ended, sent) = budget(vec![ping(1), ping(2), ping(3), ping(4), ping(5)], false);
        assert!(budget.receive().await.is_some() && budget.receive().await.is_some());
        budget.send(answer(1)).await.unwrap();
        assert!(budget.receive().await.is_some(), "the answered one no longer counts");
        assert!(!ended.load(Ordering::SeqCst));
        assert!(budget.receive().await.is_none(), "a third unanswered request");
        assert!(ended.load(Ordering::SeqCst));
        assert!(budget.end_reason().borrow().as_deref().unwrap().contains("MAX_MCP_SERVER_REQUESTS (2)"));
        assert!(budget.receive().await.is_none(), "nothing is read after the end");
        budget.send(answer(2)).await.unwrap();
        assert_eq!(sent.load(Ordering::SeqCst), 1, "nor sent");
        assert!(budget.inner.is_none(), "the transport underneath is dropped at once");
    }

    #[tokio::test]
    async fn a_request_whose_id_is_already_waiting_is_read_past() {
        let (mut budget, ended, _) = budget(vec![ping(1), ping(1), ping(1), ping(2), ping(3)], false);
        let first = budget.receive().await.unwrap();
        assert!(matches!(first, JsonRpcMessage::Request(request) if request.id == RequestId::Number(1)));
        let next = budget.receive().await.unwrap();
        assert!(
            matches!(next, JsonRpcMessage::Request(request) if request.id == RequestId::Number(2)),
            "the copies of request 1 are skipped"
        );
        assert!(!ended.load(Ordering::SeqCst));
        assert!(budget.receive().await.is_none(), "a third unanswered request");
        assert!(ended.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_answered_id_may_be_used_again_while_its_answer_is_sent() {
        let (mut budget, ended, _) = budget(vec![ping(1), ping(1), ping(2)], true);
        assert!(budget.receive().await.is_some());
        // The answer is produced; its send (never finishing here) is under way.
        let answering = budget.send(answer(1));
        let again = budget.receive().await.unwrap();
        assert!(
            matches!(again, JsonRpcMessage::Request(request) if request.id == RequestId::Number(1)),
            "the id reused after its answer was skipped as a duplicate"
        );
        assert!(budget.receive().await.is_none(), "the answer being sent still counts: a third request");
        assert!(ended.load(Ordering::SeqCst));
        drop(answering);
    }

    #[tokio::test]
    async fn sends_under_way_give_up_when_the_session_ends() {
        let (mut budget, _, _) = budget(vec![ping(1), ping(2), ping(3)], true);
        assert!(budget.receive().await.is_some() && budget.receive().await.is_some());
        let answering = tokio::spawn(budget.send(answer(1)));
        tokio::task::yield_now().await;
        assert!(budget.receive().await.is_none());
        assert!(answering.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_cancelled_request_stops_counting_only_where_rmcp_drops_its_answer() {
        let (mut legacy, ended, _) =
            budget(vec![initialized("2025-11-25"), ping(1), ping(2), cancel(1), ping(3)], false);
        for _ in 0..5 {
            assert!(legacy.receive().await.is_some());
        }
        assert!(!ended.load(Ordering::SeqCst));
        let (mut modern, ended, _) =
            budget(vec![initialized("2026-07-28"), ping(1), ping(2), cancel(1), ping(3)], false);
        for _ in 0..4 {
            assert!(modern.receive().await.is_some());
        }
        assert!(modern.receive().await.is_none() && ended.load(Ordering::SeqCst), "its answer is still sent");
    }
}
