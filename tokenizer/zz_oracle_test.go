package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

func TestZZOracle(t *testing.T) {
	data, err := os.ReadFile("/tmp/tokoracle/oracle.json")
	if err != nil {
		t.Skip(err)
	}
	var cases []struct {
		Text  string   `json:"text"`
		Split []string `json:"split"`
	}
	json.Unmarshal(data, &cases)
	bad := 0
	for _, c := range cases {
		var got []string
		for i := 0; i < len(c.Text); {
			j := nextPretoken(c.Text, i)
			got = append(got, c.Text[i:j])
			i = j
		}
		if !slices.Equal(got, c.Split) {
			bad++
			if bad < 10 {
				t.Errorf("%q:\n got  %q\n want %q", c.Text, got, c.Split)
			}
		}
	}
	t.Logf("%d cases, %d bad", len(cases), bad)
}

func TestZZOracleEnc(t *testing.T) {
	data, err := os.ReadFile("/tmp/tokoracle/enc.json")
	if err != nil {
		t.Skip(err)
	}
	var cases []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	json.Unmarshal(data, &cases)
	q := loadQwen(t)
	bad := 0
	for _, c := range cases {
		got := q.tok.Encode(c.Text, false)
		if !slices.Equal(got, c.IDs) {
			bad++
			if bad < 10 {
				t.Errorf("%q:\n got  %v\n want %v", c.Text, got, c.IDs)
			}
		}
		if d := q.tok.Decode(got); d != c.Text {
			t.Errorf("decode %q != %q", d, c.Text)
		}
	}
	t.Logf("%d cases, %d bad", len(cases), bad)
}
