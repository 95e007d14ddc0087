use std::io::Read;
use std::time::Instant;
use _native::minhash::*;
use _native::text::shingles::*;
use _native::text::distinct::DistinctSet;

fn best<F: FnMut()>(mut f: F) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..5 { let t = Instant::now(); f(); b = b.min(t.elapsed().as_secs_f64()); }
    b
}

fn main() {
    let mut s = String::new();
    std::io::BufReader::new(std::fs::File::open("/tmp/docs.txt").unwrap()).read_to_string(&mut s).unwrap();
    let docs: Vec<&str> = s.split('\u{1}').collect();
    let mut sh = Shingler::new(1, 0);
    let mut toks = Vec::new();
    let t_tok = best(|| { for d in &docs { tokenize(d, &mut toks); std::hint::black_box(&toks); } });
    let mut ds = DistinctSet::new();
    let mut tot = 0;
    let t_dist = best(|| { tot = 0; for d in &docs { ds.clear(); sh.for_each(d, |x| { ds.insert(x); }); tot += ds.len(); } });
    let mut all = 0;
    let t_sha_all = best(|| { all = 0; for d in &docs { sh.for_each(d, |x| { std::hint::black_box(sha1_hash32(x)); all += 1; }); } });
    let mut hs: Vec<Vec<u32>> = Vec::new();
    for d in &docs { ds.clear(); sh.for_each(d, |x| { ds.insert(x); }); hs.push(ds.iter().map(sha1_hash32).collect()); }
    let t_dist_sha = best(|| { for d in &docs { ds.clear(); sh.for_each(d, |x| { ds.insert(x); }); for x in ds.iter() { std::hint::black_box(sha1_hash32(x)); } } });
    let mut hv = Vec::new();
    let t_dist_sha4 = best(|| { for d in &docs { ds.clear(); sh.for_each(d, |x| { ds.insert(x); }); hv.clear(); _native::hash::sha1::sha1_hash32_many(ds.iter(), &mut hv); std::hint::black_box(&hv); } });
    let mut sb: Vec<&[u8]> = Vec::new();
    let t_sha4_all = best(|| { for d in &docs { sb.clear(); sh.for_each(d, |x| { hv.push(0); let _ = x; }); } });
    let _ = t_sha4_all;
    let mut st = 1u64;
    let mut r = || { st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (st >> 33) as u32 };
    let a: Vec<u64> = (0..256).map(|_| (r() | 1) as u64).collect();
    let b: Vec<u64> = (0..256).map(|_| r() as u64).collect();
    let a32: Vec<u32> = a.iter().map(|&x| x as u32).collect();
    let b32: Vec<u32> = b.iter().map(|&x| x as u32).collect();
    let mut sig = vec![u32::MAX; 256];
    let t_upd = best(|| for v in &hs { sig.fill(u32::MAX); update_affine32(&a32, &b32, v, &mut sig); std::hint::black_box(&sig); });
    let al: Vec<u64> = a.iter().map(|&x| x * 12345).collect();
    let t_leg = best(|| for v in &hs { sig.fill(u32::MAX); update_legacy(&al, &b, v, &mut sig); std::hint::black_box(&sig); });
    let perms = Permutations::new(Scheme::Affine32, &a, &b).unwrap();
    let mut mh = MinHasher::new(perms, 1, 0);
    let opts: Vec<Option<&str>> = docs.iter().map(|d| Some(*d)).collect();
    let mut out = vec![0u32; opts.len() * 256];
    let t_full = best(|| signatures(&mut mh, &opts, &mut out));
    let n = docs.len() as f64;
    println!("{} docs, {} bytes, {} shingles, {} distinct", docs.len(), s.len(), all, tot);
    println!("tokenize          {:7.1} ms  {:.2} ns/byte", t_tok * 1e3, t_tok * 1e9 / s.len() as f64);
    println!("tokenize+distinct {:7.1} ms  {:.1} ns/shingle", t_dist * 1e3, (t_dist - t_tok) * 1e9 / all as f64);
    println!("tokenize+sha1 all {:7.1} ms  {:.1} ns/sha1", t_sha_all * 1e3, (t_sha_all - t_tok) * 1e9 / all as f64);
    println!("tok+distinct+sha1 {:7.1} ms", t_dist_sha * 1e3);
    println!("tok+distinct+sha1x4 {:5.1} ms  {:.1} ns/sha1", t_dist_sha4 * 1e3, (t_dist_sha4 - t_dist) * 1e9 / tot as f64);
    println!("affine32 update   {:7.1} ms  {:.3} ns per (hash x perm)", t_upd * 1e3, t_upd * 1e9 / (tot as f64 * 256.0));
    println!("legacy update     {:7.1} ms  {:.3} ns per (hash x perm)", t_leg * 1e3, t_leg * 1e9 / (tot as f64 * 256.0));
    println!("full affine32     {:7.1} ms  {:.0} docs/s", t_full * 1e3, n / t_full);
}
