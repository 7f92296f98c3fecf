package respbody

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bytedance/sonic/ast"
	"github.com/loopgate/loopgate/filters"
)

// body4K is a 4 KiB JSON body like the bench backend's: a user and a list
// of items with cards.
func body4K() []byte {
	var b strings.Builder
	b.WriteString(`{"user":{"id":42,"name":"Ada Lovelace","phone":"13812345678","email":"ada@example.com"},"items":[`)
	for i := 0; b.Len() < 4096-120; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"sku":"SKU-%05d","card":"4111111111%06d","qty":%d}`, i, i, i, i%7)
	}
	b.WriteString(`],"total":12345}`)
	s := b.String()
	return []byte(s + strings.Repeat(" ", 4096-len(s)))
}

func benchFilter(b testing.TB) *filter {
	r := &Route{ResponseBody: &Config{
		Mask:     []Mask{{Path: "$.user.phone", KeepLast: 4}, {Path: "$.items[*].card", KeepLast: 4}},
		Remove:   []string{"$.user.email"},
		Envelope: `{"code":0,"data":<body>}`,
	}}
	r.Provision()
	var errs []string
	r.Validate(checkInto(&errs))
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return &filter{cfg: r.ResponseBody, counts: new(Counts).route("test", 1)}
}

// BenchmarkRewrite4K is the filter's whole work on a 4 KiB body: sonic's
// validation, two masks (one over every item), a removal and the envelope.
func BenchmarkRewrite4K(b *testing.B) {
	f := benchFilter(b)
	body := body4K()
	dst := make([]byte, 0, 8192)
	x := &filters.Exchange{Status: 200}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, ok := f.RewriteBody(x, body, dst[:0])
		if !ok || len(out) == 0 {
			b.Fatal("not rewritten")
		}
	}
}

// BenchmarkSonicAST is the same edit through sonic's ast (a lazily parsed
// tree of nodes, edited in place, then marshalled), for comparison: it
// allocates per node touched.
func BenchmarkSonicAST(b *testing.B) {
	body := string(body4K())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		root := ast.NewRaw(body)
		user := root.Get("user")
		if ph, err := user.Get("phone").String(); err == nil {
			user.Set("phone", ast.NewString("*******"+ph[len(ph)-4:]))
		}
		user.Unset("email")
		items := root.Get("items")
		n, _ := items.Len()
		for i := range n {
			it := items.Index(i)
			if c, err := it.Get("card").String(); err == nil {
				it.Set("card", ast.NewString("************"+c[len(c)-4:]))
			}
		}
		out, err := root.MarshalJSON()
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

func TestRewriteAllocs(t *testing.T) {
	f := benchFilter(t)
	body := body4K()
	dst := make([]byte, 0, 8192)
	x := &filters.Exchange{Status: 200}
	if n := testing.AllocsPerRun(100, func() { f.RewriteBody(x, body, dst[:0]) }); n != 0 {
		t.Fatalf("RewriteBody allocates %v times per body", n)
	}
}
