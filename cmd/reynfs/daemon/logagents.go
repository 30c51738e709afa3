package daemon

import (
	"encoding/json"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/journal"
)

// genAgents describes the agent states a generation holds (now) against
// those of the previous generation on its path (before), for log's
// agents parameter: a picker's agent column in the one log call. Only a
// changed state's blob is read, to find the session a hook saved in it,
// so the cost is one object read per state an agent saved, not one per
// agent and generation. A state that cannot be read or is not a hook's
// simply has no session: the column is a hint, never a reason to fail
// the log.
func (s *Service) genAgents(now, before []journal.AgentRef) []api.GenAgentState {
	if len(now) == 0 {
		return nil
	}
	prev := make(map[string]string, len(before))
	for _, a := range before {
		prev[a.Name] = a.State.String()
	}
	out := make([]api.GenAgentState, 0, len(now))
	for _, a := range now {
		st := api.GenAgentState{Name: a.Name, State: a.State.String()}
		if prev[a.Name] != st.State {
			st.Changed = true
			if b, err := s.J.Objects().Get(a.State); err == nil {
				var hs hooks.State
				if json.Unmarshal(b, &hs) == nil {
					st.Session = hs.SessionID
				}
			}
		}
		out = append(out, st)
	}
	return out
}
