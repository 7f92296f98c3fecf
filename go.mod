module github.com/loopgate/loopgate

go 1.26.8

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/bytedance/sonic v1.15.5
	github.com/cloudwego/netpoll v0.7.2
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/redis/rueidis v1.0.79
	golang.org/x/sys v0.47.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic/loader v0.5.3 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/cloudwego/gopkg v0.1.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.9 // indirect
	github.com/panjf2000/ants/v2 v2.11.3 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	golang.org/x/arch v0.0.0-20210923205945-b76863e36670 // indirect
	golang.org/x/sync v0.11.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)
