"""The quick trace bench/coldstart/trace.csv (seeded): a 100-minute ramp with a burst at 40-50 min,
sessions lognormal (median about 20 min), all ended by 115 min. Run from the repository root."""
import random
r=random.Random(34)
t=0.0; rows=[]
end=115*60
def gap(t):
    # a ramp: quiet, busy, a burst at 40-50 min, quieter
    if t<20*60: return 150
    if t<40*60: return 60
    if t<50*60: return 20
    if t<80*60: return 70
    return 120
while True:
    t+=r.expovariate(1/gap(t))
    if t>=100*60: break
    d=int(r.lognormvariate(7.1,0.5))
    d=max(min(d, end-int(t)),120)
    rows.append((int(t),d))
with open('bench/coldstart/trace.csv','w') as f:
    f.write('timestamp,duration\n')
    for s,d in rows:
        f.write('2026-01-05T%02d:%02d:%02dZ,%d\n'%(s//3600,(s%3600)//60,s%60,d))
print(len(rows), sum(d for _,d in rows)/len(rows)/60)
