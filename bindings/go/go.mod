module example.invalid/holdoff/go

go 1.24
