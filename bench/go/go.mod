module example.invalid/holdoff/bench/go

go 1.24.0

require (
	holdoff.dev/go v0.0.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect

replace holdoff.dev/go => ../../bindings/go
