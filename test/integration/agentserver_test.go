package integration

// A scripted model server on 127.0.0.1 for the end-to-end tests of real
// agent CLIs (agents_e2e_test.go): it speaks just enough of the Anthropic
// Messages API (Claude Code) and of the Gemini API (Gemini CLI) to answer
// each turn of a script with shell commands and then a closing text.
//
// It keeps no conversation state of its own: each request carries the
// whole conversation, so the reply follows from it. The turn is found by a
// key that its user prompt contains; the step within the turn by the
// number of tool results sent back since that prompt. That way retries,
// resumed sessions and side requests cannot shift the script.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// scriptTurn is one user turn: when the prompt contains Key, the model
// runs Commands one after the other through the CLI's shell tool, then
// ends the turn with Reply.
type scriptTurn struct {
	Key      string
	Commands []string
	Reply    string
}

// modelServer answers the CLIs' requests from a script.
type modelServer struct {
	t      testing.TB
	srv    *httptest.Server
	script []scriptTurn

	mu       sync.Mutex
	toolUses int      // tool calls handed out
	ends     int      // turns ended with a scripted reply
	requests []string // "METHOD path" of every request, in order
}

// newModelServer starts the server on 127.0.0.1; it stops with the test.
func newModelServer(t testing.TB, script []scriptTurn) *modelServer {
	t.Helper()
	s := &modelServer{t: t, script: script}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("model server: listen: %v", err)
	}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: s}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL (http://127.0.0.1:PORT).
func (s *modelServer) URL() string { return s.srv.URL }

// counts returns how many tool calls were handed out and turns ended.
func (s *modelServer) counts() (toolUses, ends int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.toolUses, s.ends
}

// Requests returns the requests seen so far ("METHOD path"), for failure
// messages.
func (s *modelServer) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch p := r.URL.Path; {
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && p == "/"):
		w.WriteHeader(http.StatusOK) // reachability checks
	case r.Method == http.MethodPost && p == "/v1/messages":
		s.anthropicMessages(w, body)
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		writeJSON(w, map[string]any{"input_tokens": len(body) / 4})
	case r.Method == http.MethodPost && strings.Contains(p, ":streamGenerateContent"):
		s.geminiGenerate(w, body, true)
	case r.Method == http.MethodPost && strings.Contains(p, ":generateContent"):
		s.geminiGenerate(w, body, false)
	case r.Method == http.MethodPost && strings.Contains(p, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": len(body) / 4})
	default:
		s.t.Logf("model server: unexpected request %s %s (%d bytes): answering 404", r.Method, r.URL, len(body))
		http.Error(w, `{"error":{"type":"not_found_error","message":"not scripted"}}`, http.StatusNotFound)
	}
}

// step decides the answer to one request of the main loop: prompt is the
// text of the conversation's last user prompt, done the number of tool
// results since it. It returns a command to run, or the closing reply.
func (s *modelServer) step(prompt string, done int) (command, reply string) {
	for _, turn := range s.script {
		if !strings.Contains(prompt, turn.Key) {
			continue
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if done < len(turn.Commands) {
			s.toolUses++
			return turn.Commands[done], ""
		}
		s.ends++
		return "", turn.Reply
	}
	s.t.Logf("model server: no scripted turn for prompt %q: ending the turn", clip(prompt, 200))
	return "", "nothing scripted for this prompt"
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// --- Anthropic Messages API (Claude Code) -------------------------------------

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or a list of blocks
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicMessages answers POST /v1/messages. A request that offers the
// Bash tool is the agent's main loop and follows the script; anything else
// (titles, topic detection, quota checks with small models) gets a short
// text, so that the CLI's side work does not consume the script.
func (s *modelServer) anthropicMessages(w http.ResponseWriter, body []byte) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	hasBash := false
	for _, tl := range req.Tools {
		hasBash = hasBash || tl.Name == "Bash"
	}
	if !hasBash {
		s.t.Logf("model server: side request to %s without the Bash tool (%d messages): answering with text", req.Model, len(req.Messages))
		s.anthropicReply(w, req, "", "Scripted session")
		return
	}
	// Walk back to the last user message that carries text other than
	// tool results: that is the prompt of the current turn.
	prompt, done := "", 0
	for i := len(req.Messages) - 1; i >= 0 && prompt == ""; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			prompt = str
			break
		}
		var blocks []anthropicBlock
		_ = json.Unmarshal(m.Content, &blocks)
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				done++
			case "text":
				texts = append(texts, b.Text)
			}
		}
		prompt = strings.Join(texts, "\n")
	}
	command, reply := s.step(prompt, done)
	s.anthropicReply(w, req, command, reply)
}

// anthropicReply sends a tool_use of Bash (command != "") or an end_turn
// text, streamed as server-sent events when the request asked for it.
func (s *modelServer) anthropicReply(w http.ResponseWriter, req anthropicRequest, command, text string) {
	s.mu.Lock()
	id := len(s.requests)
	s.mu.Unlock()
	msgID := fmt.Sprintf("msg_scripted_%d", id)
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	block := map[string]any{"type": "text", "text": text}
	stop := "end_turn"
	var input map[string]any
	if command != "" {
		input = map[string]any{"command": command, "description": "scripted step"}
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_scripted_%d", id), "name": "Bash", "input": input}
		stop = "tool_use"
	}
	if !req.Stream {
		writeJSON(w, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	send("message_start", map[string]any{"message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	if command != "" {
		start := map[string]any{"type": "tool_use", "id": block["id"], "name": "Bash", "input": map[string]any{}}
		send("content_block_start", map[string]any{"index": 0, "content_block": start})
		js, _ := json.Marshal(input)
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(js)}})
	} else {
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	send("message_stop", map[string]any{})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// --- Gemini API (Gemini CLI) ---------------------------------------------------------

// geminiGenerate answers generateContent and streamGenerateContent (the
// CLI asks for alt=sse). A request that declares run_shell_command is the
// agent's main loop; others (next-speaker checks, summaries) get text.
func (s *modelServer) geminiGenerate(w http.ResponseWriter, body []byte, stream bool) {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string          `json:"text"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"code":400,"message":"bad json","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
		return
	}
	hasShell := false
	for _, tl := range req.Tools {
		for _, f := range tl.FunctionDeclarations {
			hasShell = hasShell || f.Name == "run_shell_command"
		}
	}
	var part map[string]any
	finish := "STOP"
	if !hasShell {
		s.t.Logf("model server: gemini side request without run_shell_command (%d contents): answering with text", len(req.Contents))
		part = map[string]any{"text": `{"reasoning": "scripted", "next_speaker": "user"}`}
	} else {
		prompt, done := "", 0
		for i := len(req.Contents) - 1; i >= 0 && prompt == ""; i-- {
			c := req.Contents[i]
			if c.Role != "user" {
				continue
			}
			var texts []string
			for _, p := range c.Parts {
				if len(p.FunctionResponse) > 0 {
					done++
				} else if p.Text != "" {
					texts = append(texts, p.Text)
				}
			}
			prompt = strings.Join(texts, "\n")
		}
		command, reply := s.step(prompt, done)
		part = map[string]any{"text": reply}
		if command != "" {
			part = map[string]any{"functionCall": map[string]any{"name": "run_shell_command",
				"args": map[string]any{"command": command, "description": "scripted step"}}}
		}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": finish, "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion":  "gemini-scripted",
	}
	if !stream {
		writeJSON(w, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	b, _ := json.Marshal(resp)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
