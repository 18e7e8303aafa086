package launch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// outputs copies every rank's stdout and stderr to the job's writers, whole
// lines at a time when tagging, so lines of different ranks never mix.
type outputs struct {
	mu      sync.Mutex
	stdout  io.Writer
	stderr  io.Writer
	tag     bool
	forced  atomic.Bool // tag rank lines from now on (stack dumps), even without tag
	wg      sync.WaitGroup
	readers []*os.File
}

func newOutputs(stdout, stderr io.Writer, tag bool) *outputs {
	return &outputs{stdout: stdout, stderr: stderr, tag: tag}
}

// pipes makes the write ends a child gets as stdout and stderr and starts
// copying from the read ends. id < 0 marks srun output, whose lines carry
// srun's own "N: " label.
func (o *outputs) pipes(id int) (outW, errW *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	o.mu.Lock()
	o.readers = append(o.readers, outR, errR)
	o.mu.Unlock()
	o.wg.Add(2)
	go o.copy(outR, o.stdout, id)
	go o.copy(errR, o.stderr, id)
	return outW, errW, nil
}

func (o *outputs) write(w io.Writer, p ...[]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range p {
		_, _ = w.Write(b)
	}
}

// forceTag makes every rank's output tagged line by line from now on, as
// with tag; data already read is written as it was. Stack dumps of several
// ranks arrive at once, in many small writes each: only whole tagged lines
// keep them apart.
func (o *outputs) forceTag() { o.forced.Store(true) }

func (o *outputs) copy(r *os.File, w io.Writer, id int) {
	defer o.wg.Done()
	var src io.Reader = r
	startOfLine := true
	if !o.tag && id >= 0 {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 && id >= 0 && o.forced.Load() {
				// Tag from here on, starting with what was just read.
				src = io.MultiReader(bytes.NewReader(append([]byte(nil), buf[:n]...)), r)
				break
			}
			if n > 0 {
				o.write(w, buf[:n])
				startOfLine = buf[n-1] == '\n'
			}
			if err != nil {
				return
			}
		}
	}
	prefix := []byte("[" + strconv.Itoa(id) + "] ")
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			p := prefix
			if id < 0 && startOfLine {
				// srun always labels its tasks' lines; untagged output
				// drops the label until a stack dump forces tags.
				if p, line = relabel(line); !o.tag && !o.forced.Load() {
					p = nil
				}
			}
			if !startOfLine {
				p = nil
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) && line[len(line)-1] != '\n' {
				line = append(append([]byte{}, line...), '\n') // partial last line
			}
			o.write(w, p, line)
			startOfLine = line[len(line)-1] == '\n'
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// relabel turns srun's "  3: text" into "[3] " and "text".
func relabel(line []byte) (prefix, rest []byte) {
	t := bytes.TrimLeft(line, " ")
	i := bytes.IndexByte(t, ':')
	if i > 0 {
		if n, err := strconv.Atoi(string(t[:i])); err == nil && n >= 0 {
			return []byte("[" + strconv.Itoa(n) + "] "), bytes.TrimPrefix(t[i+1:], []byte(" "))
		}
	}
	return nil, line
}

// wait waits up to d for the copiers to see EOF (processes that escaped
// their process group could hold a pipe open), then closes the read ends.
func (o *outputs) wait(d time.Duration) {
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		o.mu.Lock()
		for _, r := range o.readers {
			r.Close()
		}
		o.mu.Unlock()
		<-done
	}
	o.mu.Lock()
	for _, r := range o.readers {
		r.Close()
	}
	o.readers = nil
	o.mu.Unlock()
}

// flush waits briefly for the copiers to finish (used when the process
// writing to them has exited and its last lines matter).
func (o *outputs) flush() {
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
}
