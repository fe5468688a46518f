/// Cuts a run of framed texts into writes of at most `limit` bytes, and keeps track of which texts are complete.
///
/// A chunk always ends at the furthest text boundary that fits, so a write carries as many whole texts as possible;
/// only a text longer than `limit` is cut, into `limit`-sized pieces, and its tail may share a write with the texts
/// that follow. With `limit` = PIPE_BUF every write to a pipe is atomic (all or nothing).
struct ChunkPlan {
    /// The frames, concatenated.
    let stream: [UInt8]
    /// `ends[i]` is the offset in `stream` just after frame i.
    let ends: [Int]
    let limit: Int

    init(frames: [[UInt8]], limit: Int) {
        precondition(limit > 0)
        var stream: [UInt8] = []
        stream.reserveCapacity(frames.reduce(0) { $0 + $1.count })
        var ends: [Int] = []
        ends.reserveCapacity(frames.count)
        for frame in frames {
            stream.append(contentsOf: frame)
            ends.append(stream.count)
        }
        self.stream = stream
        self.ends = ends
        self.limit = limit
    }

    /// A stream laid out already: `ends` ascending, the last one `stream.count` (or both empty).
    init(stream: [UInt8], ends: [Int], limit: Int) {
        precondition(limit > 0 && (ends.last ?? 0) == stream.count)
        self.stream = stream
        self.ends = ends
        self.limit = limit
    }

    /// The number of frames.
    var count: Int { ends.count }

    /// The bytes of frame `index`.
    func frame(_ index: Int) -> ArraySlice<UInt8> { stream[start(ofFrame: index)..<ends[index]] }

    /// Number of frames fully contained in `stream[..<position]`.
    func completed(at position: Int) -> Int {
        // Binary search: first end greater than position.
        var low = 0, high = ends.count
        while low < high {
            let mid = (low + high) / 2
            if ends[mid] <= position { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Offset where frame `index` starts.
    func start(ofFrame index: Int) -> Int {
        index == 0 ? 0 : ends[index - 1]
    }

    /// The next write from `position` (which must be < stream.count), and the cumulative number of frames that are
    /// complete once it has been written.
    func chunk(from position: Int) -> (range: Range<Int>, completes: Int) {
        let maxEnd = min(position + limit, stream.count)
        let reachable = completed(at: maxEnd)  // frames ending at or before maxEnd
        let end = reachable > 0 && ends[reachable - 1] > position ? ends[reachable - 1] : maxEnd
        return (position..<end, completed(at: end))
    }
}
