package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

const frData = "../../../shared/data/flight_recorder"

// TestHangFlightRecorderCLI runs `ppprof hang` on the hung Megatron job of
// ../shared/data whose ranks 12 and 14 had a GPU error (see
// ingest/realdata for what the dumps show): the CLI must pass ingest's
// process groups and dump progress to the analysis, and print the verdict,
// the ranks and the collective.
func TestHangFlightRecorderCLI(t *testing.T) {
	dir := frData + "/gpu_error_1st"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("../shared/data not present: the Flight Recorder samples are needed beside the repository")
	}
	stdout, stderr, code := ppprof(t, "hang", "-q", dir)
	if code != exitHangFound || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"Verdict: stalled",
		"Root cause: rank 12 (stage 3) is stuck in ALL_GATHER #42806 of group 41 (TENSOR_MODEL_PARALLEL_GROUP), which rank 13 completed",
		"ranks 12, 14 are stuck the same way",
		"rank 12 never joined ALL_TO_ALL #20537 of group 74 (EXPERT_MODEL_PARALLEL_GROUP), which ranks 13, 14, 15 posted",
		"Candidates: 12, 14",
		"Collectives pending",
		"74 EXPERT_MODEL_PARALLEL_GROUP",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, code = ppprof(t, "hang", "-q", "--format", "json", dir)
	var doc struct {
		Verdict   string `json:"verdict"`
		RootCause struct {
			Rank       int    `json:"rank"`
			Reason     string `json:"reason"`
			Candidates []int  `json:"candidates"`
		} `json:"root_cause"`
		Collectives []struct {
			Group   string `json:"group"`
			Desc    string `json:"desc"`
			Seq     int64  `json:"seq"`
			Missing []int  `json:"missing"`
		} `json:"collectives"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitHangFound {
		t.Fatalf("exit %d, %v", code, err)
	}
	if doc.Verdict != "stalled" || doc.RootCause.Rank != 12 || doc.RootCause.Reason != "stuck_in_collective" ||
		!slices.Equal(doc.RootCause.Candidates, []int{12, 14}) {
		t.Errorf("verdict %s, root cause %+v", doc.Verdict, doc.RootCause)
	}
	found := false
	for _, c := range doc.Collectives {
		found = found || c.Group == "74" && c.Desc == "EXPERT_MODEL_PARALLEL_GROUP" && c.Seq == 20537 && slices.Equal(c.Missing, []int{12})
	}
	if !found {
		t.Errorf("no all-to-all #20537 of group 74 missing rank 12 in %d collectives", len(doc.Collectives))
	}
}

// TestHangComms checks what the CLI passes from ingest to the analysis.
func TestHangComms(t *testing.T) {
	if g, d := hangComms(nil); g != nil || d != nil {
		t.Errorf("nil comms: %v %v", g, d)
	}
	c := &ingest.Comms{
		Groups: map[string]ingest.GroupInfo{"35": {Name: "35", Desc: "TENSOR_MODEL_PARALLEL_GROUP", Ranks: []trace.Rank{0, 1}}},
		FlightRecorder: map[trace.Rank]ingest.FRRank{1: {Path: "_dump_1", Entries: 3,
			PGStatus: map[string]ingest.FRGroupStatus{"5": {LastEnqueued: 9, LastStarted: -1, LastCompleted: 7}}}},
	}
	g, d := hangComms(c)
	if g["35"].Desc != "TENSOR_MODEL_PARALLEL_GROUP" || !slices.Equal(g["35"].Ranks, []trace.Rank{0, 1}) {
		t.Errorf("groups %+v", g)
	}
	if f := d[1]; f.Path != "_dump_1" || f.Entries != 3 || f.Progress["5"].LastEnqueued != 9 || f.Progress["5"].LastCompleted != 7 || f.Progress["5"].LastStarted != -1 {
		t.Errorf("dumps %+v", d)
	}
}

// TestHangREADMEFlightRecorderExample keeps the README's second hang
// example true: the CLI's output for gpu_error_1st appears in README.md.
func TestHangREADMEFlightRecorderExample(t *testing.T) {
	dir := frData + "/gpu_error_1st"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("../shared/data not present: the Flight Recorder samples are needed beside the repository")
	}
	stdout, _, _ := ppprof(t, "hang", "-q", dir)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), strings.TrimSuffix(stdout, "\n")) {
		t.Errorf("README.md does not show the output of `ppprof hang -q ../shared/data/flight_recorder/gpu_error_1st`:\n%s", stdout)
	}
}
