# dm-master, dm-worker and dmctl in one image (docker-compose.yml runs it three times).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/...

FROM debian:bookworm-slim
COPY --from=build /out/ /usr/local/bin/
COPY examples/compose/ /examples/
WORKDIR /var/lib/tributary
