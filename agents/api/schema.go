package api

import (
	"encoding/json"
	"fmt"
	"path"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/reynfs/reynfs/cas"
)

// methods lists every method with its params and result types: the
// schema is made from it, so a method added here is documented there.
var methods = []struct {
	params Params
	result Result
}{
	{HelloParams{}, &HelloResult{}},
	{StatusParams{}, &StatusResult{}},
	{StoreStatusParams{}, &StatusResult{}},
	{CheckpointParams{}, &CheckpointResult{}},
	{UnmountParams{}, &UnmountResult{}},
	{LogParams{}, &LogReply{}},
	{DiffParams{}, &DiffResult{}},
	{ShowParams{}, &ShowResult{}},
	{ExportParams{}, &SeqResult{}},
	{RewindParams{}, &RewindResult{}},
	{RestoreParams{}, &RestoreResult{}},
	{GCParams{}, &GCResult{}},
	{RetentionParams{}, &RetentionResult{}},
	{AgentSaveParams{}, &SeqResult{}},
	{AgentListParams{}, &AgentListResult{}},
	{AgentShowParams{}, &AgentShowResult{}},
	{SubscribeParams{}, &SubscribeResult{}},
	{RunStartParams{}, &RunStartResult{}},
	{RunAttachParams{}, &EmptyResult{}},
	{RunExitedParams{}, &EmptyResult{}},
	{RunsParams{}, &RunsResult{}},
	{OpLogParams{}, &OpLogResult{}},
	{UndoParams{}, &UndoResult{}},
	{RedoParams{}, &UndoResult{}},
	{BranchListParams{}, &BranchListResult{}},
	{BranchNameParams{}, &BranchNameResult{}},
	{CheckoutParams{}, &RewindResult{}},
	{VersionParams{}, &VersionResult{}},
	{PushParams{}, &PushResult{}},
	{SyncParams{}, &SyncResult{}},
	{RemoteListParams{}, &RemoteListResult{}},
	{RemoteAddParams{}, &RemoteResult{}},
	{RemoteRemoveParams{}, &RemoteResult{}},
	{SyncModeParams{}, &SyncModeResult{}},
	{ForgetParams{}, &ForgetResult{}},
}

// outputs are the objects CLI commands print under --json that no method
// returns (the others print a method's result, or for 'reynfs run' the
// run.started and run.exited events): "cli.NAME" in the schema, so every
// --json output has one.
var outputs = []struct {
	name string
	v    any
}{
	{"cli.mount", MountInfo{}},
	{"cli.export", ExportInfo{}},
	{"cli.integrate", IntegrateInfo{}},
	{"cli.checkpoint_sync", CheckpointSyncInfo{}},
}

// Schema is the JSON schema of the protocol, generated from the Go types:
// one property per method's params ("METHOD.params") and result
// ("METHOD.result"), the envelope, and the event a subscription sends.
// docs/api.schema.json is its output, checked by a golden test.
func Schema() ([]byte, error) {
	fields := []reflect.StructField{
		{Name: "Request", Type: reflect.TypeOf(Request{}), Tag: `json:"request"`},
		{Name: "Response", Type: reflect.TypeOf(Response{}), Tag: `json:"response"`},
		{Name: "Notification", Type: reflect.TypeOf(Notification{}), Tag: `json:"notification"`},
	}
	for i, m := range methods {
		name := m.params.Method()
		fields = append(fields,
			reflect.StructField{Name: fmt.Sprintf("P%d", i), Type: reflect.TypeOf(m.params), Tag: reflect.StructTag(fmt.Sprintf(`json:"%s.params"`, name))},
			reflect.StructField{Name: fmt.Sprintf("R%d", i), Type: reflect.TypeOf(m.result).Elem(), Tag: reflect.StructTag(fmt.Sprintf(`json:"%s.result"`, name))})
	}
	for i, o := range outputs {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("O%d", i), Type: reflect.TypeOf(o.v),
			Tag: reflect.StructTag(fmt.Sprintf(`json:"%s"`, o.name))})
	}
	named := map[string]reflect.Type{}
	var clash error
	r := &jsonschema.Reflector{
		// A hash is its hex text on the wire (cas.Hash.MarshalText).
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == reflect.TypeOf(cas.Hash{}) {
				return &jsonschema.Schema{Type: "string", Pattern: "^[0-9a-f]{64}$"}
			}
			return nil
		},
		AllowAdditionalProperties: true, // add-only within a major version
		// Types of other packages are named with it (rewind.Result):
		// rewind has a RestoreResult of its own.
		Namer: func(t reflect.Type) string {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			name := t.Name()
			if p := t.PkgPath(); p != "" && p != reflect.TypeOf(Head{}).PkgPath() {
				name = path.Base(p) + "." + name
			}
			if o, ok := named[name]; ok && o != t && name != "" {
				clash = fmt.Errorf("schema: %s and %s are both named %s", o, t, name)
			}
			named[name] = t
			return name
		},
	}
	s := r.ReflectFromType(reflect.StructOf(fields))
	if clash != nil {
		return nil, clash
	}
	s.ID = jsonschema.ID(fmt.Sprintf("https://github.com/reynfs/reynfs/docs/api.schema.json#v%d", Major))
	s.Title = fmt.Sprintf("reynfs control API %s", Version)
	s.Description = "JSON-RPC 2.0 over the store's unix socket, one object per line; see docs/api.md. Each METHOD.params is a request's params, each METHOD.result its result; each cli.NAME is what a reynfs command prints under --json where it prints no method's result."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return append(b, '\n'), nil
}

// MethodReadOnly reports whether the method named only reads the store
// (false for a method not in the protocol).
func MethodReadOnly(name string) bool {
	for _, m := range methods {
		if m.params.Method() == name {
			return ReadOnly(m.params)
		}
	}
	return false
}
