package tokenizer

import (
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/qwenc/qwenc/internal/testmodel"
)

// qwen holds the real Qwen vocabulary, built once per test binary because
// parsing the 11 MB tokenizer.json dominates the package's test time.
type qwen struct {
	vocab *Vocab
	blob  []byte
	tok   *Tokenizer
}

var (
	qwenOnce sync.Once
	qwenVal  *qwen
	qwenErr  error
)

func loadQwen(tb testing.TB) *qwen {
	tb.Helper()
	qwenOnce.Do(func() {
		tj, err := os.ReadFile(testmodel.TokenizerJSON(tb))
		if err != nil {
			qwenErr = err
			return
		}
		cfg, err := os.ReadFile(testmodel.Testdata(tb, "tiny-a", "tokenizer_config.json"))
		if err != nil {
			qwenErr = err
			return
		}
		q := &qwen{}
		if q.vocab, err = LoadHF(tj, cfg); err != nil {
			qwenErr = err
			return
		}
		if q.blob, err = q.vocab.MarshalBinary(); err != nil {
			qwenErr = err
			return
		}
		if q.tok, err = Load(q.blob); err != nil {
			qwenErr = err
			return
		}
		qwenVal = q
	})
	if qwenErr != nil {
		tb.Fatal(qwenErr)
	}
	return qwenVal
}

type testCase struct {
	Text          string  `json:"text"`
	IDs           []int32 `json:"ids"`
	SpecialTokens bool    `json:"special_tokens"`
}

func loadCases(tb testing.TB) []testCase {
	tb.Helper()
	data, err := os.ReadFile(testmodel.Testdata(tb, "tokenizer", "cases.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var cases []testCase
	if err := json.Unmarshal(data, &cases); err != nil {
		tb.Fatal(err)
	}
	if len(cases) == 0 {
		tb.Fatal("cases.json has no cases")
	}
	return cases
}
