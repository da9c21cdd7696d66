module example.invalid/holdoff/bench/go

go 1.24

require (
	example.invalid/holdoff/go v0.0.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect

replace example.invalid/holdoff/go => ../../bindings/go
