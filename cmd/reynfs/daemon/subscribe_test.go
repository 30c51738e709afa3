package daemon

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
)

// TestSubscribeDropsSlowSubscriber: a subscriber that reads nothing while
// records keep coming is cut off once its buffer is full, with a last
// dropped event after what was buffered; the stream ends and the tail
// with it (nothing waits on the subscriber).
func TestSubscribeDropsSlowSubscriber(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d := &Daemon{j: j, log: zerolog.Nop(), done: make(chan struct{})}
	s := &Service{J: j}
	server, client := net.Pipe() // unbuffered: a write waits for the reader
	defer client.Close()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer server.Close()
		d.subscribe(server, json.NewEncoder(server), api.SubscribeParams{Buffer: 1})
	}()
	// Records across several ticks, read by no one: the writer holds init,
	// the buffer one writes event, the next one overflows it.
	for i := 0; i < 6; i++ {
		if _, err := s.AgentSave("a", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * eventTick)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(client)
	var types []string
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break
		}
		var n api.Notification
		if err := json.Unmarshal(line, &n); err != nil || n.Method != api.EventMethod {
			t.Fatalf("not an event: %q (%v)", line, err)
		}
		types = append(types, n.Params.Type)
		if n.Params.Type == api.EventWrites && (n.Params.Writes.Records == 0 || len(n.Params.Writes.Top) == 0 && n.Params.Writes.Ops == nil) {
			t.Errorf("writes event without counts: %+v", n.Params.Writes)
		}
	}
	if len(types) < 3 || types[0] != api.EventInit || types[len(types)-1] != api.EventDropped || len(types) > 3 {
		t.Fatalf("events %v; want init, the one buffered writes event, then dropped", types)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription did not end after dropping its subscriber")
	}
}
